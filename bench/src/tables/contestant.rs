//! A table as data: each contestant is a small value — its name, whose
//! figures its row holds, how it is prepared, how one sample of it is
//! taken, and the columns it has no figure for — and a table is a list of
//! them. One runner, [`measure`], takes every table's list through the
//! harness's interleaved rounds ([`interleave`]) and adds the rows.
//!
//! ```text
//! Contestant::peer(NATIVE)
//!     .runs(|s| native(ctx, s))
//!     .absent(&[BATCHED], "why the native row has no batched figure")
//! ```

use crate::harness::{self, interleave};
use crate::model::{Kind, Samples, Table};
use std::collections::BTreeMap;

/// Takes one sample of each of a contestant's figures, pushing them into
/// the samples it is given, keyed "name/column" ([`crate::model::key`]).
pub type Sample<'a> = Box<dyn FnMut(&mut Samples) -> Result<(), String> + 'a>;

/// Prepares a contestant once, before the rounds: what it returns takes
/// the samples.
type Build<'a> = Box<dyn FnOnce() -> Result<Sample<'a>, String> + 'a>;

/// One contestant of a table.
pub struct Contestant<'a> {
    /// Its name: its row's, the prefix of its figures' keys, and the name
    /// its failure is reported under.
    pub name: String,
    /// Whose figures its row holds; `None` for a contestant with no row
    /// of its own (its figures fill other contestants' rows, or notes).
    pub kind: Option<Kind>,
    /// Columns its row has no figure for, and why (said in the notes).
    pub absent: Vec<(Vec<String>, String)>,
    /// How it is prepared and sampled; `None` for a row whose figures
    /// another contestant takes (a variant measured in the same run).
    build: Option<Build<'a>>,
}

impl<'a> Contestant<'a> {
    fn new(name: &str, kind: Option<Kind>) -> Contestant<'a> {
        Contestant {
            name: name.into(),
            kind,
            absent: vec![],
            build: None,
        }
    }

    /// A row of Warden's figures.
    pub fn warden(name: &str) -> Contestant<'a> {
        Contestant::new(name, Some(Kind::Warden))
    }

    /// A row of another system's figures.
    pub fn peer(name: &str) -> Contestant<'a> {
        Contestant::new(name, Some(Kind::Peer))
    }

    /// A contestant with no row of its own: it takes figures for other
    /// contestants' rows (or for the notes).
    pub fn rowless(name: &str) -> Contestant<'a> {
        Contestant::new(name, None)
    }

    /// Takes each sample with `run`, which needs no preparation.
    pub fn runs(mut self, run: impl FnMut(&mut Samples) -> Result<(), String> + 'a) -> Self {
        self.build = Some(Box::new(move || Ok(Box::new(run) as Sample<'a>)));
        self
    }

    /// Prepared once by `build`, before the rounds (if it fails, that is
    /// the contestant's error and it takes no sample); then takes each
    /// sample with `run` on what `build` made.
    pub fn prepared<S: 'a>(
        mut self,
        build: impl FnOnce() -> Result<S, String> + 'a,
        mut run: impl FnMut(&mut S, &mut Samples) -> Result<(), String> + 'a,
    ) -> Self {
        self.build = Some(Box::new(move || {
            let mut state = build()?;
            Ok(Box::new(move |s: &mut Samples| run(&mut state, s)) as Sample<'a>)
        }));
        self
    }

    /// Declares that its row has no figure for `columns`, and why.
    pub fn absent(mut self, columns: &[&str], why: &str) -> Self {
        let columns = columns.iter().map(|c| c.to_string()).collect();
        self.absent.push((columns, why.into()));
        self
    }
}

/// What a table's rounds gave: every sample, and the first error of each
/// contestant that failed.
pub struct Measured {
    pub samples: Samples,
    pub errors: BTreeMap<String, String>,
}

impl Measured {
    /// No rounds: a set-up every contestant shares failed with `error`,
    /// which is each one's that takes samples.
    pub fn failed(contestants: &[Contestant], error: &str) -> Measured {
        let errors = contestants
            .iter()
            .filter(|c| c.build.is_some())
            .map(|c| (c.name.clone(), error.to_string()))
            .collect();
        Measured {
            samples: Samples::default(),
            errors,
        }
    }

    /// Attaches the errors to the table's rows and computes its ratios
    /// (see [`super::finish`]).
    pub fn finish(&self, table: Table) -> Table {
        super::finish(table, &self.errors)
    }
}

/// The shared runner: prepares and runs `contestants` in `rounds`
/// interleaved rounds, then adds their rows to `table` in order, their
/// figures keyed by name.
pub fn measure(rounds: usize, table: &mut Table, mut contestants: Vec<Contestant>) -> Measured {
    let measured = run(rounds, &mut contestants);
    rows(table, &contestants, &measured.samples, "");
    measured
}

/// Prepares every contestant that takes samples, in order, then runs them
/// in `rounds` interleaved rounds after a warm-up round. One whose
/// preparation failed fails in the warm-up round, with that error.
pub fn run(rounds: usize, contestants: &mut [Contestant]) -> Measured {
    let entries = contestants
        .iter_mut()
        .filter_map(|c| {
            let build = c.build.take()?;
            let sample =
                build().unwrap_or_else(|e| Box::new(move |_: &mut Samples| Err(e.clone())));
            Some(harness::contestant(&c.name, sample))
        })
        .collect();
    let (samples, errors) = interleave(rounds, entries);
    Measured { samples, errors }
}

/// Adds a row to `table` for every contestant that has one, in order, its
/// figures keyed "name/{sub}column"; then declares each one's absent
/// columns.
pub fn rows(table: &mut Table, contestants: &[Contestant], samples: &Samples, sub: &str) {
    for c in contestants {
        if let Some(kind) = c.kind {
            table.row_from(&c.name, kind, samples, &format!("{}/{sub}", c.name));
        }
    }
    for c in contestants {
        for (columns, why) in &c.absent {
            let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
            table.absent(&c.name, &columns, why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A row filled by another contestant's run, a contestant with no row,
    /// a preparation that fails, and absent columns.
    #[test]
    fn rows_follow_the_list_and_runs_its_order() {
        let built = Cell::new(0);
        let mut t = Table::new("t", "T", "seed", &[("a", "us"), ("b", "us")]);
        let m = measure(
            2,
            &mut t,
            vec![
                Contestant::warden("W").prepared(
                    || {
                        built.set(built.get() + 1);
                        Ok(2.0)
                    },
                    |x, s| {
                        s.push("W/a", *x);
                        s.push("W/b", 1.0);
                        s.push("W2/a", 3.0);
                        Ok(())
                    },
                ),
                Contestant::warden("W2").absent(&["b"], "none"),
                Contestant::rowless("extra").runs(|s| {
                    s.push("note", 1.0);
                    Ok(())
                }),
                Contestant::peer("P").prepared(|| Err::<(), _>("no peer".into()), |_, _| Ok(())),
            ],
        );
        assert_eq!(built.get(), 1);
        let names: Vec<&str> = t.rows.iter().map(|r| r.system.as_str()).collect();
        assert_eq!(names, ["W", "W2", "P"]);
        assert_eq!(t.rows[0].cells[0].as_ref().unwrap().median, 2.0);
        assert_eq!(t.rows[1].absent, ["b"]);
        assert_eq!(t.notes, ["W2: no b: none."]);
        assert_eq!(m.samples.0["note"].len(), 2);
        assert_eq!(m.errors["P"], "no peer");
        let t = m.finish(t);
        assert_eq!(t.rows[2].note.as_deref(), Some("failed: no peer"));
        assert_eq!(t.ratios.len(), 0);
    }
}
