//! One test of a section, apart from the runner that schedules and counts
//! it (`mod.rs`), so that the sections' files (lab, model, teaching) build
//! on this alone and not on the runner that lists them.

/// How a test that cannot run here (a tool missing) says so: its error
/// starts with this, and it is counted as skipped, never silently left out.
pub(crate) const SKIP: &str = "SKIP: ";

/// One test of a section that has not run yet: its name, and what running
/// it does (`Ok(what it showed)`, empty when the name says it all).
pub(crate) struct Test<'a> {
    pub name: String,
    pub(super) run: Box<dyn FnOnce() -> Result<String, String> + Send + 'a>,
    /// Runs while no other such test of its section does (a fixed port, a
    /// shared output directory): these run one after another, as one job
    /// beside the section's others.
    pub alone: bool,
}

impl<'a> Test<'a> {
    pub fn new(name: String, run: impl FnOnce() -> Result<String, String> + Send + 'a) -> Test<'a> {
        Test {
            name,
            run: Box::new(run),
            alone: false,
        }
    }

    /// This test, run alone ([`Test::alone`]) if `alone`.
    pub fn alone_if(self, alone: bool) -> Test<'a> {
        Test { alone, ..self }
    }

    /// A test whose PASS line is its name alone.
    pub fn plain(name: String, run: impl FnOnce() -> Result<(), String> + Send + 'a) -> Test<'a> {
        Test::new(name, move || run().map(|()| String::new()))
    }
}
