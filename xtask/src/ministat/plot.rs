//! ministat's ASCII plot.
//!
//! The x axis spans every set's min, max and mean ± stddev over `width`
//! columns; column c holds the values in [x0 + c·dx, x0 + (c+1)·dx) with
//! dx = span / (width - 1) and x0 = min - dx/2, so min and max fall in the
//! middle of the end columns. Equal columns of one set stack upward. A cell
//! holds a bit per set (set i is bit value i + 1, the sets are ORed), and
//! the code picks the symbol: x is 1, + is 2, so an x and a + in one cell
//! make 3, which prints `*` — the third set's symbol too, as in ministat.
//! Under the points, each set gets a bar `|___M__A___|` from mean - stddev
//! to mean + stddev, M at the median and A at the mean; all sets share one
//! bar line unless `separate_bars`.

use super::stats::{sorted, Formula, Summary};

/// The plot symbol for each cell code; index i + 1 is set i's own symbol.
pub const SYMBOLS: [char; 8] = [' ', 'x', '+', '*', '%', '#', '@', 'O'];

/// How many sets a plot can tell apart.
pub const MAX_SETS: usize = SYMBOLS.len() - 1;

/// One set as the plot needs it.
pub struct PlotSet<'a> {
    /// Ascending.
    pub sorted: &'a [f64],
    pub summary: &'a Summary,
}

/// The plot's left end and its span: every set's min, max and mean ±
/// stddev, folded as the C tool folds them (from 999e99 and -999e99).
fn extent(sets: &[PlotSet]) -> (f64, f64) {
    let mut lo = 999e99;
    let mut hi = -999e99;
    for s in sets {
        let m = s.summary;
        // NaN (an undefined stddev) compares false and changes nothing.
        for v in [m.min, m.max, m.mean - m.stddev, m.mean + m.stddev] {
            if v < lo {
                lo = v;
            }
            if v > hi {
                hi = v;
            }
        }
    }
    (lo, hi - lo)
}

/// Why FreeBSD's ministat has no defined plot for `sets` at `width`, or
/// `None`. It indexes its plot with `(int)((v - x0) / dx)` for every point,
/// median, mean and mean ± stddev, and that is out of its buffer (a crash)
/// when the quotient is NaN or infinite: a `nan` or `inf` in the data, or
/// `-w 1` (dx = span / 0). With a zero span it draws nothing and is safe.
/// (The readers refuse non-finite values and values beyond
/// `input::MAX_MAGNITUDE`, so a span is finite here; the check stays for
/// any set that reaches the plot.)
/// Every formula refuses `-w 1` (the C tools crash alike), the others `-w
/// 0` too; only [`Formula::FreeBsd`] refuses non-finite data, the others
/// say there is no plot.
pub fn unplottable(sets: &[(String, Vec<f64>)], width: usize, formula: Formula) -> Option<String> {
    let sorted: Vec<Vec<f64>> = sets.iter().map(|(_, v)| sorted(v, formula)).collect();
    let summaries: Vec<Summary> = sets
        .iter()
        .zip(&sorted)
        .map(|((_, v), s)| Summary::of_sorted(v, s, formula))
        .collect();
    let plot_sets: Vec<PlotSet> = sorted
        .iter()
        .zip(&summaries)
        .map(|(sorted, summary)| PlotSet { sorted, summary })
        .collect();
    let (lo, span) = extent(&plot_sets);
    if span == 0.0 {
        return None;
    }
    if width == 1 {
        return Some(
            "a plot needs a width of 0 or at least 2 (FreeBSD's ministat crashes with -w 1)".into(),
        );
    }
    if formula != Formula::FreeBsd {
        // Debian's build aborts at -w 0 (glibc's realloc(p, 0) frees p).
        return (width == 0).then(|| "a plot needs a width of at least 2".into());
    }
    let dx = span / (width as f64 - 1.0);
    let x0 = lo - 0.5 * dx;
    for ((name, _), s) in sets.iter().zip(&plot_sets) {
        let m = s.summary;
        let marks = [m.median, m.mean, m.mean - m.stddev, m.mean + m.stddev];
        let bad = s
            .sorted
            .iter()
            .chain(&marks)
            .any(|&v| !((v - x0) / dx).is_finite());
        if bad {
            return Some(format!(
                "cannot plot {name}: it holds nan or inf (FreeBSD's ministat crashes on that plot); \
                 -A or -n print its statistics"
            ));
        }
    }
    None
}

/// The plot at `-w 0`, as FreeBSD prints it: every point falls in the one
/// column that is not drawn, so the frame holds a `||` line per stack level
/// (the stack is the whole set) and per bar.
fn render_no_columns(sets: &[PlotSet], separate_bars: bool, cut: bool) -> String {
    let levels = if cut {
        sets.last().map_or(0, |s| s.sorted.len())
    } else {
        sets.iter().map(|s| s.sorted.len()).max().unwrap_or(0)
    };
    let bars = if separate_bars { sets.len() } else { 1 };
    let mut out = String::from("++\n");
    for _ in 0..levels + bars {
        out.push_str("||\n");
    }
    out.push_str("++\n");
    out
}

/// Renders the plot (its last line ends in a newline). `cut` keeps a
/// quirk of both C tools, FreeBSD's and Debian's (every formula but
/// `--exact` asks for it): the plot's height is that of the *last* set's
/// tallest stack, so a later set with lower stacks cuts off the tops of an
/// earlier set's stacks (and a later, taller one clears what was above the
/// cut). Without it, the plot is as tall as the tallest stack of any set.
///
/// Needs at most [`MAX_SETS`] sets, and a `width` other than 1 unless the
/// span is zero.
pub fn render(sets: &[PlotSet], width: usize, separate_bars: bool, cut: bool) -> String {
    assert!(sets.len() <= MAX_SETS, "at most {MAX_SETS} sets");
    let (lo, span) = extent(sets);
    if span == 0.0 {
        return "[no plot, span is zero width]\n".to_string();
    }
    assert!(width != 1, "a plot needs two columns, or none");
    if !span.is_finite() {
        // The C tool indexes memory with NaN here; we say why there is no plot.
        return "[no plot, span is not finite]\n".to_string();
    }
    if width == 0 {
        return render_no_columns(sets, separate_bars, cut);
    }
    let dx = span / (width as f64 - 1.0);
    let x0 = lo - 0.5 * dx;
    // C converts to int by truncation toward zero; clamping keeps stray
    // values (NaN data) inside the plot instead of outside the buffer.
    let column = |v: f64| (((v - x0) / dx) as i64).clamp(0, width as i64 - 1) as usize;

    // rows[j][c]: stack level j (1 = bottom; row 0 is never drawn).
    let mut rows: Vec<Vec<u8>> = Vec::new();
    let mut bars: Vec<Option<Vec<u8>>> = vec![None; sets.len()];
    for (i, s) in sets.iter().enumerate() {
        let code = (i + 1) as u8;
        let columns: Vec<usize> = s.sorted.iter().map(|&v| column(v)).collect();
        let mut height = 1;
        let mut run = 0;
        for (k, &c) in columns.iter().enumerate() {
            run = if k > 0 && columns[k - 1] == c {
                run + 1
            } else {
                1
            };
            height = height.max(run);
        }
        let height = height + 1;
        if cut {
            // The C tool reallocates only to grow and clears only the new
            // rows, but always sets the height to this set's.
            rows.truncate(height);
        }
        if height > rows.len() {
            rows.resize(height, vec![0; width]);
        }
        for (k, &c) in columns.iter().enumerate() {
            run = if k > 0 && columns[k - 1] == c {
                run + 1
            } else {
                1
            };
            rows[run][c] |= code;
        }

        let bar = bars[if separate_bars { i } else { 0 }].get_or_insert_with(|| vec![0; width]);
        let m = s.summary;
        if !m.stddev.is_nan() {
            let left = column(m.mean - m.stddev);
            let right = column(m.mean + m.stddev);
            bar[right] = b'|';
            bar[left] = b'|';
            for cell in bar.iter_mut().take(right).skip(left + 1) {
                if *cell == 0 {
                    *cell = b'_';
                }
            }
        }
        bar[column(m.median)] = b'M';
        bar[column(m.mean)] = b'A';
    }

    let border = format!("+{}+\n", "-".repeat(width));
    let mut out = border.clone();
    for row in rows.iter().skip(1).rev() {
        out.push('|');
        for &code in row {
            match SYMBOLS.get(usize::from(code)) {
                Some(&c) => out.push(c),
                None => out.push_str(&format!("[{code:02x}]")),
            }
        }
        out.push_str("|\n");
    }
    for bar in bars.iter().flatten() {
        out.push('|');
        out.extend(
            bar.iter()
                .map(|&b| if b == 0 { ' ' } else { char::from(b) }),
        );
        out.push_str("|\n");
    }
    out.push_str(&border);
    out
}
