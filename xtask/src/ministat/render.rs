//! ministat's whole report as text: legend, plot, table, comparisons.

use super::cfmt;
use super::plot::{self, PlotSet, SYMBOLS};
use super::stats::{compare_summaries, sorted, Comparison, Formula, Summary};

/// What to print, and how. `Default` is ministat with no flags (a 74-column
/// plot, 95 % confidence) with [`Formula::Exact`], which takes any level.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderOptions {
    /// Plot width in columns, without its frame (0, or at least 2).
    pub width: usize,
    /// Confidence level for the comparisons, in percent (0 < level < 100).
    pub confidence: f64,
    pub formula: Formula,
    /// Draw the plot (`-A` and `-n` turn it off).
    pub plot: bool,
    /// Compare each later set with the first (`-n` turns it off).
    pub compare: bool,
    /// Print the legend and the table's header line (`-q` turns them off).
    pub headers: bool,
    /// One bar line per set (`-s`).
    pub separate_bars: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            width: 74,
            confidence: 95.0,
            formula: Formula::Exact,
            plot: true,
            compare: true,
            headers: true,
            separate_bars: false,
        }
    }
}

/// The table's header line.
const TABLE_HEADER: &str =
    "    N           Min           Max        Median           Avg        Stddev\n";

/// The full ministat text for `sets`, each a name and its values in input
/// order. Sets after the first are compared with the first.
///
/// # Panics
/// With more than [`plot::MAX_SETS`] sets, or a plot narrower than 2.
pub fn render(sets: &[(String, Vec<f64>)], opts: &RenderOptions) -> String {
    assert!(
        sets.len() <= plot::MAX_SETS,
        "ministat tells at most {} sets apart",
        plot::MAX_SETS
    );
    let sorted_sets: Vec<Vec<f64>> = sets.iter().map(|(_, v)| sorted(v, opts.formula)).collect();
    let summaries: Vec<Summary> = sets
        .iter()
        .zip(&sorted_sets)
        .map(|((_, v), s)| Summary::of_sorted(v, s, opts.formula))
        .collect();

    let mut out = String::new();
    if opts.headers {
        for (i, (name, _)) in sets.iter().enumerate() {
            out.push_str(&format!("{} {name}\n", SYMBOLS[i + 1]));
        }
    }
    if opts.plot {
        let plot_sets: Vec<PlotSet> = sorted_sets
            .iter()
            .zip(&summaries)
            .map(|(sorted, summary)| PlotSet { sorted, summary })
            .collect();
        out.push_str(&plot::render(
            &plot_sets,
            opts.width,
            opts.separate_bars,
            opts.formula != Formula::Exact,
        ));
    }
    if opts.headers {
        out.push_str(TABLE_HEADER);
    }
    for (i, summary) in summaries.iter().enumerate() {
        out.push_str(&table_row(SYMBOLS[i + 1], summary, opts.formula));
        if i > 0 && opts.compare {
            let c = compare_summaries(&summaries[0], summary, opts.confidence, opts.formula);
            out.push_str(&comparison_text(&c, opts.formula));
        }
    }
    out
}

/// One table row: `%c %3d %13.8g %13.8g %13.8g %13.8g %13.8g`. A NaN
/// prints as `nan` (FreeBSD's printf drops its sign), or as glibc prints
/// it (`-nan` when the sign bit is set) for [`Formula::Classic`].
fn table_row(symbol: char, s: &Summary, formula: Formula) -> String {
    let mut row = format!("{symbol} {:>3}", s.n);
    for v in [s.min, s.max, s.median, s.mean, s.stddev] {
        row.push(' ');
        row.push_str(&cfmt::g_width(unsigned_nan(v, formula), 13, 8));
    }
    row.push('\n');
    row
}

/// The comparison block for one later set, its NaNs printed as `formula`'s
/// C library prints them (see [`table_row`]).
pub fn comparison_text(c: &Comparison, formula: Formula) -> String {
    let level = level_text(c.confidence);
    let g = |v: f64| cfmt::g(unsigned_nan(v, formula), 6);
    if c.proven {
        format!(
            "Difference at {level}% confidence\n\
             \t{} +/- {}\n\
             \t{}% +/- {}%\n\
             \t(Student's t, pooled s = {})\n",
            g(c.difference),
            g(c.interval),
            g(c.percent),
            g(c.percent_interval),
            g(c.pooled_stddev),
        )
    } else {
        format!("No difference proven at {level}% confidence\n")
    }
}

/// `v`, or a NaN without its sign bit when `formula` prints as FreeBSD.
fn unsigned_nan(v: f64, formula: Formula) -> f64 {
    if v.is_nan() && formula != Formula::Classic {
        f64::NAN.copysign(1.0)
    } else {
        v
    }
}

/// The level as ministat prints it (`%.1f`: 95.0, 99.5), or in full when
/// one decimal would misstate it (99.95, not 100.0).
fn level_text(level: f64) -> String {
    let one_decimal = cfmt::f1(level);
    if one_decimal.parse::<f64>() == Ok(level) {
        one_decimal
    } else {
        level.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        assert_eq!(level_text(95.0), "95.0");
        assert_eq!(level_text(99.5), "99.5");
        assert_eq!(level_text(99.95), "99.95");
        assert_eq!(level_text(97.125), "97.125");
    }

    /// Today's formulas through the whole report (values of
    /// `stats::tests::modern_formulas_by_hand`).
    #[test]
    fn modern_report() {
        let sets = vec![
            ("a".to_string(), vec![14.0, 10.0, 16.0, 12.0]),
            ("b".to_string(), vec![30.0, 20.0, 28.0, 22.0, 26.0, 24.0]),
        ];
        let opts = RenderOptions {
            plot: false,
            ..RenderOptions::default()
        };
        let expect = "\
x a
+ b
    N           Min           Max        Median           Avg        Stddev
x   4            10            16            13            13     2.5819889
+   6            20            30            25            25     3.7416574
Difference at 95.0% confidence
\t12 +/- 4.99265
\t92.3077% +/- 48.5729%
\t(Student's t, pooled s = 3.3541)
";
        assert_eq!(render(&sets, &opts), expect);
    }

    #[test]
    fn quiet_and_no_compare() {
        let sets = vec![
            ("a".to_string(), vec![1.0, 2.0, 3.0]),
            ("b".to_string(), vec![1.0, 2.0, 4.0]),
        ];
        let opts = RenderOptions {
            plot: false,
            compare: false,
            headers: false,
            ..RenderOptions::default()
        };
        let expect = "\
x   3             1             3             2             2             1
+   3             1             4             2     2.3333333     1.5275252
";
        assert_eq!(render(&sets, &opts), expect);
    }

    /// Too few points give NaNs, not a panic (the command refuses such
    /// sets before rendering; library callers may not).
    #[test]
    fn tiny_sets_do_not_panic() {
        let sets = vec![
            ("one".to_string(), vec![1.0]),
            ("none".to_string(), vec![]),
            ("two".to_string(), vec![1.0, 2.0]),
        ];
        for formula in [Formula::FreeBsd, Formula::Exact, Formula::Classic] {
            let opts = RenderOptions {
                formula,
                ..RenderOptions::default()
            };
            let text = render(&sets, &opts);
            assert!(text.contains("x   1             1             1"), "{text}");
            assert!(text.contains("No difference proven"), "{text}");
        }
    }
}
