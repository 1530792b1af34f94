//! Named checks, collected: every check of a test runs, and the test fails at the end
//! with the list of the failed ones and what was seen.

use std::fmt::Debug;

/// The checks of one test.
#[derive(Default)]
pub struct Checks {
    passed: usize,
    failed: Vec<String>,
}

impl Checks {
    /// `name` holds when `cond`; `seen` is printed when it does not.
    pub fn check(&mut self, name: &str, cond: bool, seen: impl Debug) {
        if cond {
            self.passed += 1;
            println!("ok    {name}");
        } else {
            println!("FAIL  {name}: {seen:?}");
            self.failed.push(format!("{name}: {seen:?}"));
        }
    }

    /// `name` holds when `got == want`.
    pub fn eq<T: PartialEq + Debug>(&mut self, name: &str, got: T, want: T) {
        let cond = got == want;
        self.check(name, cond, format_args!("got {got:?}, want {want:?}"));
    }

    /// Fail the test when any check failed.
    pub fn done(self) {
        println!("{} passed, {} failed", self.passed, self.failed.len());
        assert!(
            self.failed.is_empty(),
            "{} check(s) failed:\n{}",
            self.failed.len(),
            self.failed.join("\n")
        );
    }
}
