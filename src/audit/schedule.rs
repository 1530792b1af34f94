//! A CronJob's next scheduled time, computed as the CronJob controller computes it (pure).
//!
//! The controller (k8s.io/kubernetes `pkg/controller/cronjob/utils.go` and
//! `cronjob_controllerv2.go`) parses `spec.schedule` with robfig/cron v3's standard parser
//! (`cron.ParseStandard`), after prefixing `TZ=<spec.timeZone> ` when the schedule names no
//! zone of its own (`formatSchedule`). The facts carried over from that parser
//! (`parser.go`, `spec.go` of github.com/robfig/cron v3), in this file's own code:
//!
//! - exactly five fields, minute hour day-of-month month day-of-week, seconds always 0;
//!   each a comma list of `*` or `?`, `N`, `N-M`, each with an optional `/STEP` (`N/STEP`
//!   means `N-max/STEP`); months `jan`–`dec` and weekdays `sun`–`sat` by name, any case;
//!   day of week 0–6 (Sunday is 0; 7 is refused);
//! - descriptors `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`),
//!   `@hourly`, and `@every DURATION` (Go's duration syntax, at least a second);
//! - a leading `TZ=ZONE ` or `CRON_TZ=ZONE ` names the zone;
//! - when both day fields are restricted a day matches either; when either is a bare `*`
//!   or `?` (a step above 1 makes it restricted) it must match both;
//! - the next time is searched field by field from the next whole second, in the zone,
//!   at most five years ahead; a local time skipped by a DST change resolves to the later
//!   wall time, as Go's `time.Date` does.
//!
//! With no zone at all the controller uses kube-controller-manager's local zone, which the
//! audit can't see: UTC is assumed (what the controller's container almost always runs in).

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

/// The bit set on a field written `*` or `?` (robfig's "star bit"): it changes how the two
/// day fields combine.
const STAR: u64 = 1 << 63;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    when: When,
    zone: TimeZone,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum When {
    /// Bit sets of the allowed values of each field.
    Fields {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
    },
    /// `@every`: a fixed delay from the last scheduled run, whole seconds.
    Every(SignedDuration),
}

/// A schedule the audit can't compute a time for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScheduleError {
    /// Not the syntax the controller accepts.
    #[error("schedule {schedule:?}: {why}")]
    Syntax {
        /// The schedule as written.
        schedule: String,
        /// What is wrong.
        why: String,
    },
    /// A time zone the embedded database lacks (or the build has none: feature `tzdb`).
    #[error("time zone {0:?} is not in pullcheck's time-zone database")]
    Zone(String),
    /// No time matches within five years (`0 0 30 2 *`: February 30th).
    #[error("no time matches within five years")]
    Never,
}

/// The zone of an IANA name, from the embedded database.
fn zone(name: &str) -> Result<TimeZone, ScheduleError> {
    if name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    // Built without the `tzdb` feature the database is empty: every name but UTC is
    // refused here, with this same error.
    jiff::tz::db()
        .get(name)
        .map_err(|_| ScheduleError::Zone(name.to_string()))
}

impl Schedule {
    /// Parse `schedule` with `time_zone` (`spec.timeZone`), as the controller does.
    pub(crate) fn parse(
        schedule: &str,
        time_zone: Option<&str>,
    ) -> Result<Schedule, ScheduleError> {
        let syntax = |why: String| ScheduleError::Syntax {
            schedule: schedule.to_string(),
            why,
        };
        let mut spec = schedule.trim();
        // `formatSchedule`: a schedule mentioning TZ keeps its own; else spec.timeZone.
        let mut zone_name = if schedule.contains("TZ") {
            None
        } else {
            time_zone.map(str::to_string)
        };
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let (head, rest) = spec
                .split_once(' ')
                .ok_or_else(|| syntax("a time zone and nothing after it".into()))?;
            zone_name = head.split_once('=').map(|(_, z)| z.to_string());
            spec = rest.trim();
        }
        let zone = match zone_name.as_deref() {
            Some(z) => zone(z)?,
            None => TimeZone::UTC,
        };
        if spec.is_empty() {
            return Err(syntax("empty".into()));
        }
        let when = if spec.starts_with('@') {
            descriptor(spec).map_err(syntax)?
        } else {
            let fields: Vec<&str> = spec.split_whitespace().collect();
            if fields.len() != 5 {
                return Err(syntax(format!(
                    "expected exactly 5 fields, found {}",
                    fields.len()
                )));
            }
            let f = |i: usize, b: Bounds| field(fields[i], b).map_err(&syntax);
            When::Fields {
                minute: f(0, MINUTE)?,
                hour: f(1, HOUR)?,
                dom: f(2, DOM)?,
                month: f(3, MONTH)?,
                dow: f(4, DOW)?,
            }
        };
        Ok(Schedule { when, zone })
    }

    /// The first scheduled time after `now`. `last` is the last scheduled run
    /// (`status.lastScheduleTime`, else the CronJob's `creationTimestamp`): only `@every`
    /// counts from it.
    pub(crate) fn next(
        &self,
        now: Timestamp,
        last: Option<Timestamp>,
    ) -> Result<Timestamp, ScheduleError> {
        match &self.when {
            When::Every(delay) => {
                let start = last.unwrap_or(now);
                if start > now {
                    return Ok(start);
                }
                let secs = delay.as_secs().max(1);
                let behind = now.as_second() - start.as_second();
                let steps = behind / secs + 1;
                Timestamp::from_second(start.as_second() + steps * secs)
                    .map_err(|_| ScheduleError::Never)
            }
            When::Fields {
                minute,
                hour,
                dom,
                month,
                dow,
            } => next_fields(
                now.to_zoned(self.zone.clone()),
                [*minute, *hour, *dom, *month, *dow],
            )
            .ok_or(ScheduleError::Never),
        }
    }
}

/// A field's range and names.
#[derive(Clone, Copy)]
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
/// Names from 1 (`jan`).
const MONTH: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
/// Names from 0 (`sun`).
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// Every value of a field, with the star bit.
fn all(b: Bounds) -> u64 {
    bits(b.min, b.max, 1) | STAR
}

fn bits(start: u32, end: u32, step: u32) -> u64 {
    (start..=end)
        .step_by(step as usize)
        .fold(0, |acc, v| acc | 1 << v)
}

fn descriptor(spec: &str) -> Result<When, String> {
    let f = |minute, hour, dom, month, dow| When::Fields {
        minute,
        hour,
        dom,
        month,
        dow,
    };
    let one = |v: u32| 1u64 << v;
    Ok(match spec.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => f(one(0), one(0), one(1), one(1), all(DOW)),
        "@monthly" => f(one(0), one(0), one(1), all(MONTH), all(DOW)),
        "@weekly" => f(one(0), one(0), all(DOM), all(MONTH), one(0)),
        "@daily" | "@midnight" => f(one(0), one(0), all(DOM), all(MONTH), all(DOW)),
        "@hourly" => f(one(0), all(HOUR), all(DOM), all(MONTH), all(DOW)),
        _ => match spec.strip_prefix("@every ") {
            Some(d) => {
                let d = go_duration(d.trim())?;
                // At least a second, whole seconds (robfig's `Every`).
                let secs = d.as_secs().max(1);
                When::Every(SignedDuration::from_secs(secs))
            }
            None => return Err(format!("unrecognized descriptor {spec:?}")),
        },
    })
}

/// A comma list of ranges.
fn field(text: &str, b: Bounds) -> Result<u64, String> {
    text.split(',').try_fold(0, |acc, r| Ok(acc | range(r, b)?))
}

fn range(expr: &str, b: Bounds) -> Result<u64, String> {
    let (span, step) = match expr.split('/').collect::<Vec<_>>()[..] {
        [span] => (span, None),
        [span, step] => (span, Some(step)),
        _ => return Err(format!("too many slashes in {expr:?}")),
    };
    let ends: Vec<&str> = span.split('-').collect();
    let (mut start, mut end, mut extra) = (b.min, b.max, 0);
    if ends[0] == "*" || ends[0] == "?" {
        extra = STAR;
    } else {
        start = value(ends[0], b)?;
        end = match ends[..] {
            [_] => start,
            [_, e] => value(e, b)?,
            _ => return Err(format!("too many hyphens in {expr:?}")),
        };
    }
    let step = match step {
        None => 1,
        Some(s) => {
            let s = number(s)?;
            if ends.len() == 1 && extra == 0 {
                end = b.max;
            }
            if s > 1 {
                extra = 0;
            }
            s
        }
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({})",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!("end of range ({end}) above maximum ({})", b.max));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end})"
        ));
    }
    if step == 0 {
        return Err(format!(
            "step of range should be a positive number: {expr:?}"
        ));
    }
    Ok(bits(start, end, step) | extra)
}

fn value(text: &str, b: Bounds) -> Result<u32, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + b.min);
    }
    number(text)
}

fn number(text: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .map_err(|_| format!("failed to parse int from {text:?}"))
}

/// Go's `time.ParseDuration` syntax: a sequence of decimal numbers with units `ns`, `us`
/// (`µs`), `ms`, `s`, `m`, `h` (`1h30m`, `1.5h`, `90s`).
fn go_duration(text: &str) -> Result<SignedDuration, String> {
    let bad = || format!("invalid duration {text:?}");
    if text == "0" {
        return Ok(SignedDuration::ZERO);
    }
    let mut rest = text;
    let mut nanos: i128 = 0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, tail) = rest.split_at(n);
        let u = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u);
        let scale: f64 = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        nanos += (v * scale) as i128;
        rest = tail;
    }
    i64::try_from(nanos / 1_000_000_000)
        .map(SignedDuration::from_secs)
        .map_err(|_| bad())
}

/// The civil time `dt` in `t`'s zone, a skipped wall time resolving later (Go's
/// `time.Date`).
fn at(t: &Zoned, dt: DateTime) -> Option<Zoned> {
    t.time_zone().to_ambiguous_zoned(dt).compatible().ok()
}

/// Go's `AddDate`: civil fields plus `months` and `days`, overflow carried (Jan 31 plus
/// a month is March 3rd), at the same wall time.
fn add_date(t: &Zoned, months: i32, days: i64) -> Option<Zoned> {
    let total = t.year() as i32 * 12 + (t.month() as i32 - 1) + months;
    let first = Date::new(
        total.div_euclid(12) as i16,
        (total.rem_euclid(12) + 1) as i8,
        1,
    )
    .ok()?;
    let date = first
        .checked_add(SignedDuration::from_hours(
            24 * (i64::from(t.day()) - 1 + days),
        ))
        .ok()?;
    at(t, date.to_datetime(t.time()))
}

fn plus(t: &Zoned, secs: i64) -> Option<Zoned> {
    t.checked_add(SignedDuration::from_secs(secs)).ok()
}

/// Down to a whole multiple of `secs` of Unix time (Go's `Truncate`).
fn truncate(t: &Zoned, secs: i64) -> Option<Zoned> {
    let s = t.timestamp().as_second();
    Timestamp::from_second(s - s.rem_euclid(secs))
        .ok()
        .map(|ts| ts.to_zoned(t.time_zone().clone()))
}

fn day_matches(t: &Zoned, dom: u64, dow: u64) -> bool {
    let d = dom & (1 << t.day()) != 0;
    let w = dow & (1 << t.weekday().to_sunday_zero_offset()) != 0;
    if dom & STAR != 0 || dow & STAR != 0 {
        d && w
    } else {
        d || w
    }
}

/// robfig's search: from the next whole second, bump month, day, hour, minute in turn,
/// starting over when one wraps into the next larger unit.
fn next_fields(now: Zoned, [minute, hour, dom, month, dow]: [u64; 5]) -> Option<Timestamp> {
    let mut t = plus(&now, 1)?;
    t = truncate(&t, 1)?;
    let mut added = false;
    let limit = t.year() + 5;
    'wrap: loop {
        if t.year() > limit {
            return None;
        }
        while month & (1 << t.month()) == 0 {
            if !added {
                added = true;
                t = at(
                    &t,
                    t.date()
                        .first_of_month()
                        .to_datetime(jiff::civil::Time::midnight()),
                )?;
            }
            t = add_date(&t, 1, 0)?;
            if t.month() == 1 {
                continue 'wrap;
            }
        }
        while !day_matches(&t, dom, dow) {
            if !added {
                added = true;
                t = at(&t, t.date().to_datetime(jiff::civil::Time::midnight()))?;
            }
            t = add_date(&t, 0, 1)?;
            // Back to midnight when a DST change moved the wall time.
            let h = i64::from(t.hour());
            if h != 0 {
                t = plus(&t, if h > 12 { (24 - h) * 3600 } else { -h * 3600 })?;
            }
            if t.day() == 1 {
                continue 'wrap;
            }
        }
        while hour & (1 << t.hour()) == 0 {
            if !added {
                added = true;
                t = at(&t, t.date().at(t.hour(), 0, 0, 0))?;
            }
            t = plus(&t, 3600)?;
            if t.hour() == 0 {
                continue 'wrap;
            }
        }
        while minute & (1 << t.minute()) == 0 {
            if !added {
                added = true;
                t = truncate(&t, 60)?;
            }
            t = plus(&t, 60)?;
            if t.minute() == 0 {
                continue 'wrap;
            }
        }
        // Seconds: always 0 in the standard syntax.
        while t.second() != 0 {
            if !added {
                added = true;
                t = truncate(&t, 1)?;
            }
            t = plus(&t, 1)?;
            if t.second() == 0 {
                continue 'wrap;
            }
        }
        return Some(t.timestamp());
    }
}

#[cfg(test)]
mod tests;
