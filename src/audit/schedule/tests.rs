//! Next times worked out by hand on the calendar (2026-12-03 is a Thursday), in the zones
//! named, with robfig/cron v3's rules as the module says them.

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// The next time after `now` as RFC 3339 in UTC.
fn next(schedule: &str, zone: Option<&str>, now: &str) -> String {
    Schedule::parse(schedule, zone)
        .unwrap()
        .next(ts(now), None)
        .unwrap()
        .to_string()
}

const THU: &str = "2026-12-03T12:00:00Z";

#[test]
fn five_fields_in_utc() {
    assert_eq!(
        next("0 3 * * *", None, "2026-12-03T14:00:00Z"),
        "2026-12-04T03:00:00Z"
    );
    assert_eq!(
        next("*/15 * * * *", None, "2026-12-03T14:07:30Z"),
        "2026-12-03T14:15:00Z"
    );
    // On the minute: strictly after now.
    assert_eq!(
        next("0 3 * * *", None, "2026-12-04T03:00:00Z"),
        "2026-12-05T03:00:00Z"
    );
    // N/STEP is N-max/STEP: 50 and 55 past.
    assert_eq!(
        next("50/5 * * * *", None, "2026-12-03T14:51:00Z"),
        "2026-12-03T14:55:00Z"
    );
    // Names, any case: Monday January 4th 2027.
    assert_eq!(
        next("0 12 * jan,FEB mon", None, THU),
        "2027-01-04T12:00:00Z"
    );
    assert_eq!(
        next("0 12 * * MON-fri", None, "2026-12-05T00:00:00Z"),
        "2026-12-07T12:00:00Z"
    );
}

#[test]
fn both_day_fields_restricted_match_either_a_star_makes_them_match_both() {
    // The 1st or a Monday: Monday the 7th.
    assert_eq!(next("0 0 1 * 1", None, THU), "2026-12-07T00:00:00Z");
    // `*/1` keeps the star: the 1st, any weekday.
    assert_eq!(next("0 0 1 * */1", None, THU), "2027-01-01T00:00:00Z");
    // `*/2` (Sun, Tue, Thu, Sat) is restricted: the 1st or one of those, Saturday the 5th.
    assert_eq!(next("0 0 1 * */2", None, THU), "2026-12-05T00:00:00Z");
    // `?` is a star too.
    assert_eq!(next("0 0 ? * 1", None, THU), "2026-12-07T00:00:00Z");
}

#[test]
fn descriptors() {
    assert_eq!(
        next("@hourly", None, "2026-12-03T14:20:00Z"),
        "2026-12-03T15:00:00Z"
    );
    assert_eq!(next("@daily", None, THU), "2026-12-04T00:00:00Z");
    assert_eq!(next("@midnight", None, THU), "2026-12-04T00:00:00Z");
    assert_eq!(next("@weekly", None, THU), "2026-12-06T00:00:00Z");
    assert_eq!(next("@monthly", None, THU), "2027-01-01T00:00:00Z");
    assert_eq!(next("@yearly", None, THU), "2027-01-01T00:00:00Z");
    assert_eq!(next("@annually", None, THU), "2027-01-01T00:00:00Z");
    // @every counts from the last run: 10:20 + k·1h, the first after 14:00.
    let every = Schedule::parse("@every 1h", None).unwrap();
    assert_eq!(
        every
            .next(ts("2026-12-03T14:00:00Z"), Some(ts("2026-12-03T10:20:00Z")))
            .unwrap()
            .to_string(),
        "2026-12-03T14:20:00Z"
    );
    let every = Schedule::parse("@every 1h30m", None).unwrap();
    assert_eq!(
        every
            .next(ts("2026-12-03T14:00:00Z"), Some(ts("2026-12-03T13:00:00Z")))
            .unwrap()
            .to_string(),
        "2026-12-03T14:30:00Z"
    );
}

#[test]
fn time_zones_from_the_spec_or_the_schedule() {
    // Kathmandu is UTC+05:45: midnight of February 29th 2028 there.
    assert_eq!(
        next("0 0 29 2 *", Some("Asia/Kathmandu"), THU),
        "2028-02-28T18:15:00Z"
    );
    // New York in December is UTC-5: Monday the 7th, 09:30 EST.
    assert_eq!(
        next(
            "30 9 * * 1-5",
            Some("America/New_York"),
            "2026-12-05T12:00:00Z"
        ),
        "2026-12-07T14:30:00Z"
    );
    // A zone in the schedule: Berlin in December is UTC+1.
    assert_eq!(
        next(
            "CRON_TZ=Europe/Berlin 0 8 * * *",
            None,
            "2026-12-03T14:00:00Z"
        ),
        "2026-12-04T07:00:00Z"
    );
    // A schedule that names its zone keeps it, whatever spec.timeZone says.
    assert_eq!(
        next(
            "TZ=UTC 0 8 * * *",
            Some("Asia/Tokyo"),
            "2026-12-03T14:00:00Z"
        ),
        "2026-12-04T08:00:00Z"
    );
}

#[test]
fn a_wall_time_skipped_by_dst_is_skipped_that_day() {
    // 2027-03-14 02:30 doesn't exist in New York (clocks go 02:00 EST -> 03:00 EDT): the
    // next 02:30 is on the 15th, EDT (UTC-4).
    assert_eq!(
        next(
            "30 2 * * *",
            Some("America/New_York"),
            "2027-03-13T12:00:00Z"
        ),
        "2027-03-15T06:30:00Z"
    );
    // 01:30 happens twice on 2027-11-07 (EDT, then EST): the first.
    assert_eq!(
        next(
            "30 1 * * *",
            Some("America/New_York"),
            "2027-11-07T04:00:00Z"
        ),
        "2027-11-07T05:30:00Z"
    );
}

#[test]
fn what_the_controller_would_refuse_is_an_error_naming_the_schedule() {
    let err = |s: &str, z: Option<&str>| Schedule::parse(s, z).unwrap_err().to_string();
    assert_eq!(
        err("0 0 * * 7", None),
        "schedule \"0 0 * * 7\": end of range (7) above maximum (6)"
    );
    assert_eq!(
        err("* * * *", None),
        "schedule \"* * * *\": expected exactly 5 fields, found 4"
    );
    assert_eq!(
        err("0 0 * * * *", None),
        "schedule \"0 0 * * * *\": expected exactly 5 fields, found 6"
    );
    assert_eq!(
        err("5-1 * * * *", None),
        "schedule \"5-1 * * * *\": beginning of range (5) beyond end of range (1)"
    );
    assert_eq!(
        err("*/0 * * * *", None),
        "schedule \"*/0 * * * *\": step of range should be a positive number: \"*/0\""
    );
    assert_eq!(
        err("@fortnightly", None),
        "schedule \"@fortnightly\": unrecognized descriptor \"@fortnightly\""
    );
    assert_eq!(
        err("@every soon", None),
        "schedule \"@every soon\": invalid duration \"soon\""
    );
    assert_eq!(
        err("0 0 * * *", Some("Mars/Olympus_Mons")),
        "time zone \"Mars/Olympus_Mons\" is not in pullcheck's time-zone database"
    );
    let feb30 = Schedule::parse("0 0 30 2 *", None).unwrap();
    assert_eq!(feb30.next(ts(THU), None), Err(ScheduleError::Never));
}
