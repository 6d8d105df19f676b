//! What a benchmark run produces: tables of figures, each cell the summary
//! of repeated samples, written as JSON and rendered as the report.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The summary of one figure's samples (or, for a paper's row, the single
/// figure the paper printed, with no samples).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Every sample, in the order taken. Empty for a figure quoted from a paper.
    pub samples: Vec<f64>,
}

impl Cell {
    /// Median, minimum and maximum of `samples`; `None` if there are none
    /// or any is not a finite number.
    pub fn of(samples: Vec<f64>) -> Option<Cell> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Cell {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            samples,
        })
    }

    /// A figure quoted from a paper.
    pub fn quoted(value: f64) -> Cell {
        Cell {
            median: value,
            min: value,
            max: value,
            samples: vec![],
        }
    }

    /// Every sample multiplied by `k` (a change of unit).
    pub fn scaled(&self, k: f64) -> Cell {
        Cell {
            median: self.median * k,
            min: self.min * k,
            max: self.max * k,
            samples: self.samples.iter().map(|s| s * k).collect(),
        }
    }

    /// Whether the spread (max - min) exceeds a quarter of the median.
    pub fn noisy(&self) -> bool {
        self.samples.len() > 1 && (self.max - self.min) > 0.25 * self.median.abs()
    }
}

/// Who a row's figures belong to.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Warden, measured in this run.
    Warden,
    /// Another system, measured in this run.
    Peer,
    /// A figure printed in one of the papers, on its own hardware.
    Paper,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub unit: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub system: String,
    pub kind: Kind,
    /// One per column; `None` where the figure does not apply or was not run.
    pub cells: Vec<Option<Cell>>,
    /// How the row was measured, or why cells are missing.
    pub note: Option<String>,
    /// Columns that do not apply to this row (a figure the system does
    /// not have): their empty cells are not a failure.
    #[serde(default)]
    pub absent: Vec<String>,
    /// Where the table's placement varied ([`Table::placement`]): the
    /// figures of the rounds with the near (fast) core-to-core round
    /// trip, and of those with the far one.
    #[serde(default)]
    pub near: Vec<Option<Cell>>,
    #[serde(default)]
    pub far: Vec<Option<Cell>>,
}

/// Warden's median over a peer's, one column.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ratio {
    pub warden: String,
    pub peer: String,
    pub column: String,
    pub value: f64,
    /// The same within the near and within the far rounds, where the
    /// placement varied.
    #[serde(default)]
    pub near: Option<f64>,
    #[serde(default)]
    pub far: Option<f64>,
}

/// How the plotting script draws a table.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Plot {
    /// Grouped bars, one group per column, one bar per row.
    Bars,
    /// One line per row over the columns, whose names are numbers (log axes).
    Lines,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Table {
    /// Short identifier; also the plot's file name.
    pub id: String,
    pub title: String,
    /// Which paper's table or figure this reproduces.
    pub source: String,
    /// How the figures were taken.
    pub method: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
    pub notes: Vec<String>,
    pub plot: Plot,
    /// Columns whose figures are shown side by side but time different
    /// work, so no ratio is printed for them.
    #[serde(default)]
    pub no_ratio: Vec<String>,
    /// Columns whose measurement cannot tell figures below a bound from
    /// zero, with that bound: a measured median below it is reported as
    /// "below resolution", with no ratio.
    pub resolution: Vec<(String, f64)>,
    /// Floors the run fell below: ratios a table checks in every run
    /// (quick ones too) because a change that breaks them is a
    /// regression, not noise. Each fails the run.
    #[serde(default)]
    pub regressions: Vec<String>,
    /// The Warden rows compared with the peers, when not just the first
    /// (a table whose first Warden row is not like its peers).
    #[serde(default)]
    pub ratio_from: Vec<String>,
    /// The core-to-core round trip at the start of each counted round,
    /// ns, for tables measured in interleaved rounds.
    #[serde(default)]
    pub placement: Vec<f64>,
}

impl Table {
    pub fn new(id: &str, title: &str, source: &str, columns: &[(&str, &str)]) -> Table {
        Table {
            id: id.into(),
            title: title.into(),
            source: source.into(),
            method: String::new(),
            columns: columns
                .iter()
                .map(|(name, unit)| Column {
                    name: name.to_string(),
                    unit: unit.to_string(),
                })
                .collect(),
            rows: vec![],
            ratios: vec![],
            notes: vec![],
            plot: Plot::Bars,
            no_ratio: vec![],
            ratio_from: vec![],
            placement: vec![],
            resolution: vec![],
            regressions: vec![],
        }
    }

    /// Adds a row; `cells` must have one entry per column.
    pub fn row(&mut self, system: &str, kind: Kind, cells: Vec<Option<Cell>>) -> &mut Row {
        assert_eq!(
            cells.len(),
            self.columns.len(),
            "row {system} of {}",
            self.id
        );
        self.rows.push(Row {
            system: system.into(),
            kind,
            cells,
            note: None,
            absent: vec![],
            near: vec![],
            far: vec![],
        });
        self.rows.last_mut().unwrap()
    }

    /// Adds a row from samples keyed by column name (missing keys: `None`).
    pub fn row_from(&mut self, system: &str, kind: Kind, samples: &Samples, prefix: &str) {
        let keys: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{prefix}{}", c.name))
            .collect();
        let cells = keys.iter().map(|k| samples.cell(k)).collect();
        if self.placement.is_empty() {
            self.placement = samples.1.c2c.iter().flatten().copied().collect();
        }
        let split = self.placement_split();
        let row = self.row(system, kind, cells);
        if let Some(at) = split {
            let part = |keep: &dyn Fn(f64) -> bool| -> Vec<Option<Cell>> {
                keys.iter()
                    .map(|k| Cell::of(samples.in_rounds(k, keep)))
                    .collect()
            };
            row.near = part(&|c| c <= at);
            row.far = part(&|c| c > at);
        }
    }

    /// Where the core-to-core round trip varied over the rounds (the
    /// slowest at least 1.5 times the fastest), the bound between near
    /// and far rounds: halfway between the two.
    pub fn placement_split(&self) -> Option<f64> {
        let min = self.placement.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.placement.iter().copied().fold(0.0, f64::max);
        (min.is_finite() && max > 1.5 * min).then(|| (min + max) / 2.0)
    }

    /// A row of figures quoted from a paper (`None` for its blanks).
    pub fn paper(&mut self, system: &str, values: &[Option<f64>]) {
        self.row(
            system,
            Kind::Paper,
            values.iter().map(|v| v.map(Cell::quoted)).collect(),
        );
    }

    /// Fills `ratios`: the first Warden row's median over each peer row's,
    /// for every column both have.
    pub fn compute_ratios(&mut self) {
        self.ratios.clear();
        let warden: Vec<&Row> = if self.ratio_from.is_empty() {
            self.rows
                .iter()
                .find(|r| r.kind == Kind::Warden)
                .into_iter()
                .collect()
        } else {
            self.rows
                .iter()
                .filter(|r| r.kind == Kind::Warden && self.ratio_from.contains(&r.system))
                .collect()
        };
        let mut ratios = Vec::new();
        for w in warden {
            ratios.extend(self.ratios_of(w));
        }
        self.ratios = ratios;
    }

    /// Warden row `w` over each peer, column by column.
    fn ratios_of(&self, w: &Row) -> Vec<Ratio> {
        let mut out = Vec::new();
        for peer in self.rows.iter().filter(|r| r.kind == Kind::Peer) {
            for (i, col) in self.columns.iter().enumerate() {
                if self.no_ratio.contains(&col.name) {
                    continue;
                }
                if let (Some(a), Some(b)) = (&w.cells[i], &peer.cells[i]) {
                    let resolved = !self.below_resolution(i, a) && !self.below_resolution(i, b);
                    if b.median > 0.0 && resolved {
                        let part =
                            |x: &[Option<Cell>], y: &[Option<Cell>]| match (x.get(i), y.get(i)) {
                                (Some(Some(x)), Some(Some(y))) if y.median > 0.0 => {
                                    Some(x.median / y.median)
                                }
                                _ => None,
                            };
                        out.push(Ratio {
                            warden: w.system.clone(),
                            peer: peer.system.clone(),
                            column: col.name.clone(),
                            value: a.median / b.median,
                            near: part(&w.near, &peer.near),
                            far: part(&w.far, &peer.far),
                        });
                    }
                }
            }
        }
        out
    }

    /// What is wrong with the table as a result, if anything: it has no
    /// Warden row, a Warden row lacks a figure, it has nothing to compare
    /// against, or a measured row is empty.
    pub fn problems(&self) -> Vec<String> {
        let mut out = vec![];
        let warden: Vec<_> = self
            .rows
            .iter()
            .filter(|r| r.kind == Kind::Warden)
            .collect();
        if warden.is_empty() {
            out.push(format!("{}: no Warden row", self.id));
        }
        for r in &warden {
            for (c, cell) in self.columns.iter().zip(&r.cells) {
                let i = self
                    .columns
                    .iter()
                    .position(|x| x.name == c.name)
                    .unwrap_or(0);
                let missing = cell.as_ref().is_none_or(|x| {
                    x.median.is_nan() || (x.median <= 0.0 && !self.below_resolution(i, x))
                });
                if missing && !r.absent.contains(&c.name) {
                    out.push(format!(
                        "{}: {} has no figure for {}",
                        self.id, r.system, c.name
                    ));
                }
            }
        }
        if !self.rows.iter().any(|r| r.kind != Kind::Warden) {
            out.push(format!("{}: nothing to compare Warden with", self.id));
        }
        out.extend(self.regressions.iter().map(|r| format!("{}: {r}", self.id)));
        for r in self.rows.iter().filter(|r| r.kind == Kind::Peer) {
            for (c, cell) in self.columns.iter().zip(&r.cells) {
                if cell.is_none() && !r.absent.contains(&c.name) {
                    out.push(format!(
                        "{}: peer {} has no figure for {} ({})",
                        self.id,
                        r.system,
                        c.name,
                        r.note.as_deref().unwrap_or("no reason given")
                    ));
                }
            }
        }
        out
    }

    /// Whether `cell`, measured in column `i`, is below what that column's
    /// measurement can resolve.
    pub fn below_resolution(&self, i: usize, cell: &Cell) -> bool {
        let name = &self.columns[i].name;
        self.resolution
            .iter()
            .any(|(c, least)| c == name && cell.median < *least)
    }

    /// Declares that `system`'s row has no figure for `columns`, and why
    /// (said in the report's notes).
    pub fn absent(&mut self, system: &str, columns: &[&str], why: &str) {
        let row = self
            .rows
            .iter_mut()
            .find(|r| r.system == system)
            .unwrap_or_else(|| panic!("no row {system} in {}", self.id));
        row.absent.extend(columns.iter().map(|c| c.to_string()));
        self.notes
            .push(format!("{system}: no {}: {why}.", columns.join(", ")));
    }
}

/// The key of one system's figure in a column: "system/column".
pub fn key(system: &str, column: &str) -> String {
    format!("{system}/{column}")
}

/// Samples gathered over rounds, keyed by figure ([`key`]), and the
/// rounds they came from.
#[derive(Default, Debug)]
pub struct Samples(pub BTreeMap<String, Vec<f64>>, pub Rounds);

/// Which counted round each sample came from, and the core-to-core round
/// trip measured at the start of each (the machine's state: thread
/// placement on a virtual machine moves it several-fold).
#[derive(Default, Debug)]
pub struct Rounds {
    /// The round samples are pushed in now (0: none counted yet).
    pub current: usize,
    /// Per key, the round of each of its samples.
    pub of: BTreeMap<String, Vec<usize>>,
    /// Per counted round (round 1 first), its core-to-core figure, ns.
    pub c2c: Vec<Option<f64>>,
}

impl Rounds {
    /// The core-to-core figure of counted round `round` (none for round
    /// 0, the uncounted one, or a round where it was not measured).
    pub fn c2c_of(&self, round: usize) -> Option<f64> {
        round
            .checked_sub(1)
            .and_then(|i| self.c2c.get(i).copied().flatten())
    }
}

impl Samples {
    pub fn push(&mut self, key: &str, value: f64) {
        self.0.entry(key.to_string()).or_default().push(value);
        let round = self.1.current;
        self.1.of.entry(key.to_string()).or_default().push(round);
    }

    /// Takes in the samples of another series of rounds (their rounds
    /// numbered after this one's).
    pub fn absorb(&mut self, other: Samples) {
        let offset = self.1.c2c.len();
        for (k, v) in other.0 {
            self.0.entry(k).or_default().extend(v);
        }
        for (k, rounds) in other.1.of {
            let shifted = rounds
                .into_iter()
                .map(|r| if r == 0 { 0 } else { r + offset });
            self.1.of.entry(k).or_default().extend(shifted);
        }
        self.1.c2c.extend(other.1.c2c);
    }

    /// The samples of `key` from the rounds `keep` accepts, by their
    /// core-to-core figure.
    pub fn in_rounds(&self, key: &str, keep: impl Fn(f64) -> bool) -> Vec<f64> {
        let (Some(values), Some(rounds)) = (self.0.get(key), self.1.of.get(key)) else {
            return vec![];
        };
        values
            .iter()
            .zip(rounds)
            .filter(|(_, &r)| self.1.c2c_of(r).is_some_and(&keep))
            .map(|(v, _)| *v)
            .collect()
    }

    /// Only the samples of the rounds `keep` accepts, by their
    /// core-to-core figure (the near or the far rounds of a table).
    pub fn only(&self, keep: impl Fn(f64) -> bool) -> Samples {
        let mut out = Samples(BTreeMap::new(), Rounds::default());
        out.1.c2c = self.1.c2c.clone();
        for key in self.0.keys() {
            let rounds = self.1.of.get(key).map_or(&[][..], Vec::as_slice);
            for (v, r) in self.0[key].iter().zip(rounds) {
                if self.1.c2c_of(*r).is_some_and(&keep) {
                    out.1.current = *r;
                    out.push(key, *v);
                }
            }
        }
        out
    }

    pub fn cell(&self, key: &str) -> Option<Cell> {
        Cell::of(self.0.get(key)?.clone())
    }
}

/// One complete run: the machine, how it was run, and its tables.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub date: String,
    pub quick: bool,
    pub rounds: usize,
    pub seconds: f64,
    pub machine: BTreeMap<String, String>,
    pub tables: Vec<Table>,
    /// Peers that could not be run, and why.
    pub missing: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_summaries() {
        let c = Cell::of(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((c.median, c.min, c.max), (2.0, 1.0, 3.0));
        assert_eq!(Cell::of(vec![1.0, 4.0]).unwrap().median, 2.5);
        assert!(Cell::of(vec![]).is_none());
        assert!(Cell::of(vec![1.0, f64::NAN]).is_none());
        assert!(Cell::of(vec![1.0, 2.0]).unwrap().noisy());
        assert!(!Cell::of(vec![10.0, 10.5]).unwrap().noisy());
        assert_eq!(Cell::of(vec![2.0]).unwrap().scaled(3.0).samples, vec![6.0]);
    }

    /// Rounds at 100, 400 and 110 ns: the ratios split into near (100,
    /// 110) and far (400), each from its own rounds' samples.
    #[test]
    fn figures_split_by_placement_where_it_varied() {
        let mut s = Samples::default();
        for (round, c2c, w, p) in [
            (1, 100.0, 1.0, 2.0),
            (2, 400.0, 6.0, 3.0),
            (3, 110.0, 1.0, 2.0),
        ] {
            s.1.current = round;
            s.1.c2c.push(Some(c2c));
            s.push("W/a", w);
            s.push("P/a", p);
        }
        let mut t = Table::new("t", "T", "seed", &[("a", "us")]);
        t.row_from("W", Kind::Warden, &s, "W/");
        t.row_from("P", Kind::Peer, &s, "P/");
        t.compute_ratios();
        assert_eq!(t.placement_split(), Some(250.0));
        let r = &t.ratios[0];
        assert_eq!((r.value, r.near, r.far), (0.5, Some(0.5), Some(2.0)));
        // Steady placement: no split.
        let mut steady = Table::new("t", "T", "seed", &[("a", "us")]);
        steady.placement = vec![100.0, 120.0, 140.0];
        assert_eq!(steady.placement_split(), None);
    }

    fn table() -> Table {
        let mut t = Table::new("t", "T", "seed", &[("a", "us"), ("b", "us")]);
        t.row(
            "Warden",
            Kind::Warden,
            vec![Cell::of(vec![2.0]), Cell::of(vec![9.0])],
        );
        t.row("Peer", Kind::Peer, vec![Cell::of(vec![4.0]), None]);
        t.absent("Peer", &["b"], "the peer has no b");
        t
    }

    #[test]
    fn ratios_are_warden_over_peer_where_both_exist() {
        let mut t = table();
        t.compute_ratios();
        assert_eq!(t.ratios.len(), 1);
        assert_eq!((t.ratios[0].column.as_str(), t.ratios[0].value), ("a", 0.5));
        // A column of figures for different work gets no ratio.
        t.no_ratio.push("a".into());
        t.compute_ratios();
        assert!(t.ratios.is_empty());
    }

    /// A figure below its column's resolution is a figure (not a
    /// problem), shown as such, and gets no ratio.
    #[test]
    fn figures_below_resolution_have_no_ratio() {
        let mut t = table();
        t.rows[0].cells[0] = Cell::of(vec![0.0, -0.001, 0.002]);
        t.resolution.push(("a".into(), 0.004));
        t.compute_ratios();
        assert!(t.ratios.is_empty());
        assert!(t.problems().is_empty(), "{:?}", t.problems());
        assert!(t.below_resolution(0, t.rows[0].cells[0].as_ref().unwrap()));
        assert!(!t.below_resolution(0, t.rows[1].cells[0].as_ref().unwrap()));
        // Without the declared resolution, zero is a missing figure.
        t.resolution.clear();
        assert_eq!(t.problems().len(), 1);
    }

    #[test]
    fn problems_catch_empty_figures() {
        assert!(table().problems().is_empty());
        // A peer's empty cell is a problem unless declared absent.
        let mut t = table();
        t.rows[1].absent.clear();
        assert_eq!(t.problems().len(), 1, "{:?}", t.problems());
        let mut t = table();
        t.rows[0].cells[1] = None;
        t.rows[1].cells[0] = None;
        let p = t.problems();
        assert_eq!(p.len(), 2, "{p:?}");
        let mut t = table();
        t.rows.remove(1);
        assert_eq!(t.problems().len(), 1);
        t.rows.clear();
        assert_eq!(t.problems().len(), 2);
    }
}
