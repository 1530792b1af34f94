//! What a scenario's samples say: when the Job finished, when its requests were released,
//! the timeline at each change, and the doc's and the chart's renderings of them.

use crate::sample::{Finished, Sample, num};

/// The samples of one run, in time order.
#[derive(Debug, Clone, Default)]
pub struct Series(pub Vec<Sample>);

/// `t` as the doc prints it (one decimal), or `-`.
pub fn t_str(t: Option<f64>) -> String {
    t.map(|t| format!("{t:.1}"))
        .unwrap_or_else(|| "-".to_string())
}

impl Series {
    /// The first sample's time where `pred` holds.
    pub fn first_t(&self, pred: impl Fn(&Sample) -> bool) -> Option<f64> {
        self.0.iter().find(|s| pred(s)).map(|s| s.t)
    }

    /// When the controller got its terminal condition.
    pub fn t_fin(&self) -> Option<f64> {
        self.first_t(|s| s.finished != Finished::Running)
    }

    /// The last sample's terminal condition (`Running` when it never finished).
    pub fn fin(&self) -> Finished {
        self.0
            .last()
            .map(|s| s.finished)
            .unwrap_or(Finished::Running)
    }

    /// The first sample holding no CPU requests in the namespace after one that held some.
    pub fn t_free(&self) -> Option<f64> {
        let mut held = false;
        for s in &self.0 {
            if held && s.ns_cpu_m == 0.0 {
                return Some(s.t);
            }
            held |= s.ns_cpu_m > 0.0;
        }
        None
    }

    /// Seconds with requests held: the sum of the intervals that start at a sample holding
    /// some (rounded to whole seconds as the doc prints it).
    pub fn held_s(&self) -> String {
        let s: f64 = self
            .0
            .windows(2)
            .filter(|w| w[0].ns_cpu_m > 0.0)
            .map(|w| w[1].t - w[0].t)
            .sum();
        format!("{s:.0}")
    }

    /// The highest restart count of any container, and of the pullcheck init container.
    pub fn restarts(&self) -> (u64, u64) {
        let r = self.0.iter().map(|s| s.restarts).max().unwrap_or(0);
        let i = self.0.iter().map(|s| s.init_restarts).max().unwrap_or(0);
        (r, i)
    }

    /// The pullcheck init container's terminations in the last sample that had any (the Job
    /// controller deletes an OnFailure pod when the Job fails).
    pub fn last_terms(&self) -> Vec<(i64, String)> {
        self.0
            .iter()
            .rev()
            .find(|s| !s.terms.is_empty())
            .map(|s| s.terms.clone())
            .unwrap_or_default()
    }

    /// How many distinct pods of the controller the samples saw.
    pub fn pods_seen(&self) -> usize {
        let mut names: Vec<&String> = self.0.iter().flat_map(|s| &s.pod_names).collect();
        names.sort();
        names.dedup();
        names.len()
    }

    /// The doc's timeline cell: `T s: PODS[ Job [CONDS]]` at each change, `<br>`-joined.
    pub fn timeline(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut prev = None;
        for s in &self.0 {
            let conds = s
                .job
                .find('[')
                .map(|i| format!(" Job {}", &s.job[i..]))
                .unwrap_or_default();
            let cur = format!("{}{conds}", s.pods);
            if prev.as_ref() != Some(&cur) {
                out.push(format!("{:.1} s: {cur}", s.t));
                prev = Some(cur);
            }
        }
        out.join("<br>")
    }

    /// The most CPU (m) and memory (Mi) the namespace held: `CPUm / MEMMi`.
    pub fn alloc_str(&self) -> String {
        let cpu = self.0.iter().map(|s| s.ns_cpu_m).fold(0.0, f64::max);
        let mem = self.0.iter().map(|s| s.ns_mem_mi).max().unwrap_or(0);
        format!("{}m / {mem}Mi", num(cpu))
    }

    /// The last sample's holdings: `CPUm / MEMMi (node CPUm / MEMMi)`.
    pub fn last_alloc(&self) -> String {
        match self.0.last() {
            Some(s) => format!(
                "{}m / {}Mi (node {}m / {}Mi)",
                num(s.ns_cpu_m),
                s.ns_mem_mi,
                num(s.node_cpu_m),
                s.node_mem_mi
            ),
            None => "-".to_string(),
        }
    }

    /// The detail section's sample lines: one per change of the job state or the pods.
    pub fn detail_lines(&self) -> String {
        let mut out = String::new();
        let mut prev = None;
        for s in &self.0 {
            let cur = format!("{} | {}", s.job, s.pods);
            if prev.as_ref() != Some(&cur) {
                out.push_str(&format!(
                    "{:>6}  {} | {} | ns {}m/{}Mi node {}m/{}Mi\n",
                    format!("{:.1}", s.t),
                    s.job,
                    s.pods,
                    num(s.ns_cpu_m),
                    s.ns_mem_mi,
                    num(s.node_cpu_m),
                    s.node_mem_mi
                ));
                prev = Some(cur);
            }
        }
        out
    }

    /// The chart's rows for scenario `id` (docs/fail-fast-data/timeline.csv): one at
    /// `kubectl create`, then one per change of the pods, the terminal condition or the
    /// requests held; the first row with a terminal condition names it (`job Failed`).
    pub fn csv_rows(&self, id: &str) -> String {
        let mut out = format!("{id},0.0,0,0,kubectl create\n");
        let mut prev = None;
        let mut done = false;
        for s in &self.0 {
            let mut ev = format!("pods {}", s.pods);
            if s.finished != Finished::Running && !done {
                ev = format!("job {}", s.finished.as_str());
                done = true;
            }
            let ev = ev.replace(',', ";");
            let cur = (
                s.finished,
                s.pods.clone(),
                s.ns_cpu_m.to_bits(),
                s.ns_mem_mi,
            );
            if prev.as_ref() != Some(&cur) {
                out.push_str(&format!(
                    "{id},{:.1},{},{},{ev}\n",
                    s.t,
                    num(s.ns_cpu_m),
                    s.ns_mem_mi
                ));
                prev = Some(cur);
            }
        }
        out
    }
}

/// A table cell: `|` escaped, newlines as spaces, trailing spaces dropped.
pub fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('\n', " ")
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, fin: Finished, job: &str, pods: &str, cpu: f64) -> Sample {
        Sample {
            t,
            finished: fin,
            failed_pods: 0,
            job: job.into(),
            pods: pods.into(),
            pod_names: vec![format!("j-{}", pods.split(':').next().unwrap_or(""))],
            waiting: Vec::new(),
            restarts: 0,
            init_restarts: 0,
            terms: Vec::new(),
            ns_cpu_m: cpu,
            ns_mem_mi: if cpu > 0.0 { 2048 } else { 0 },
            node_cpu_m: cpu + 750.0,
            node_mem_mi: 768,
        }
    }

    fn run() -> Series {
        use Finished::*;
        let a = "active=1 failed=0 succeeded=0";
        let f = "active=0 failed=1 succeeded=0 [FailureTarget,Failed]";
        Series(vec![
            s(
                0.1,
                Running,
                a,
                "x1:Pending(init pullcheck=W:PodInitializing)",
                1000.0,
            ),
            s(
                0.6,
                Running,
                a,
                "x1:Pending(init pullcheck=W:PodInitializing)",
                1000.0,
            ),
            s(1.0, Running, a, "x1:Pending(init pullcheck=T:11)", 1000.0),
            s(2.6, Running, a, "x1:Failed(init pullcheck=T:11)", 0.0),
            s(3.3, Failed, f, "x1:Failed(init pullcheck=T:11)", 0.0),
            s(3.8, Failed, f, "x1:Failed(init pullcheck=T:11)", 0.0),
        ])
    }

    #[test]
    fn times_and_holdings() {
        let r = run();
        assert_eq!(t_str(r.t_fin()), "3.3");
        assert_eq!(t_str(r.t_free()), "2.6");
        assert_eq!(r.fin(), Finished::Failed);
        // 0.5 + 0.4 + 1.6 s with requests held: 2.4999… in binary, printed as awk's %.0f did
        assert_eq!(r.held_s(), "2");
        assert_eq!(r.pods_seen(), 1);
        assert_eq!(r.alloc_str(), "1000m / 2048Mi");
        assert_eq!(r.last_alloc(), "0m / 0Mi (node 750m / 768Mi)");
        assert_eq!(t_str(Series::default().t_fin()), "-");
    }

    #[test]
    fn renderings_at_each_change() {
        let r = run();
        assert_eq!(
            r.timeline(),
            "0.1 s: x1:Pending(init pullcheck=W:PodInitializing)<br>\
             1.0 s: x1:Pending(init pullcheck=T:11)<br>\
             2.6 s: x1:Failed(init pullcheck=T:11)<br>\
             3.3 s: x1:Failed(init pullcheck=T:11) Job [FailureTarget,Failed]"
        );
        assert_eq!(
            r.detail_lines(),
            "   0.1  active=1 failed=0 succeeded=0 | x1:Pending(init pullcheck=W:PodInitializing) | ns 1000m/2048Mi node 1750m/768Mi\n\
             \x20  1.0  active=1 failed=0 succeeded=0 | x1:Pending(init pullcheck=T:11) | ns 1000m/2048Mi node 1750m/768Mi\n\
             \x20  2.6  active=1 failed=0 succeeded=0 | x1:Failed(init pullcheck=T:11) | ns 0m/0Mi node 750m/768Mi\n\
             \x20  3.3  active=0 failed=1 succeeded=0 [FailureTarget,Failed] | x1:Failed(init pullcheck=T:11) | ns 0m/0Mi node 750m/768Mi\n"
        );
        assert_eq!(
            r.csv_rows("3"),
            "3,0.0,0,0,kubectl create\n\
             3,0.1,1000,2048,pods x1:Pending(init pullcheck=W:PodInitializing)\n\
             3,1.0,1000,2048,pods x1:Pending(init pullcheck=T:11)\n\
             3,2.6,0,0,pods x1:Failed(init pullcheck=T:11)\n\
             3,3.3,0,0,job Failed\n"
        );
        assert_eq!(md_escape("a | b\nc  "), "a \\| b c");
    }
}
