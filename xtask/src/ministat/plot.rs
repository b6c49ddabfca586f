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

use super::stats::Summary;

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

/// Renders the plot (its last line ends in a newline). `classic` keeps a
/// quirk of the C tool: the plot's height is that of the *last* set's
/// tallest stack, so a later set with lower stacks cuts off the tops of an
/// earlier set's stacks (and a later, taller one clears what was above the
/// cut). Without it, the plot is as tall as the tallest stack of any set.
///
/// Needs `width >= 2` and at most [`MAX_SETS`] sets.
pub fn render(sets: &[PlotSet], width: usize, separate_bars: bool, classic: bool) -> String {
    assert!(width >= 2, "a plot needs at least two columns");
    assert!(sets.len() <= MAX_SETS, "at most {MAX_SETS} sets");
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
    let span: f64 = hi - lo;
    if span == 0.0 {
        return "[no plot, span is zero width]\n".to_string();
    }
    if !span.is_finite() {
        // The C tool indexes memory with NaN here; we say why there is no plot.
        return "[no plot, span is not finite]\n".to_string();
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
        if classic {
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
