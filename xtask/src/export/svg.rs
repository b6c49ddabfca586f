//! One compared metric as an SVG strip plot: a row per set, every sample a
//! dot, the median a tall tick, the mean's confidence interval a bar. Plain
//! SVG 1.1, no script, so that it shows on a forge's pull request and on a
//! web page alike.

use crate::compare::{fmt_num, median, Compared};
use crate::ministat;

/// Plot geometry, in SVG user units (pixels).
const WIDTH: f64 = 720.0;
/// Left margin: the sets' names.
const LEFT: f64 = 150.0;
const RIGHT: f64 = 30.0;
/// Top margin: the title and the caption.
const TOP: f64 = 50.0;
const ROW: f64 = 36.0;
/// Bottom margin: the axis and its labels.
const BOTTOM: f64 = 46.0;
const DOT_RADIUS: f64 = 2.5;
/// One colour per set (ministat's symbols tell at most 7 sets apart).
const COLOURS: [&str; 7] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf",
];

/// Text made safe inside an SVG element or attribute.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Half-width of the `confidence` % interval of the mean of `v` (0 for
/// fewer than 2 values).
fn interval(v: &[f64], confidence: f64) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let s = ministat::summarize(v);
    ministat::student_t(confidence, (v.len() - 1) as f64) * s.stddev / (v.len() as f64).sqrt()
}

/// The plot of `c`, drawing `samples` (each set's values: per batch or per
/// boot, as `what` says), its axis in `c`'s unit; the title ends in
/// `labels` (the clock, profile, accelerator and baseline:
/// `super::Labels::line`).
pub fn plot(
    c: &Compared,
    samples: &[(String, Vec<f64>)],
    what: &str,
    labels: &str,
    confidence: f64,
) -> String {
    let all: Vec<f64> = samples
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .collect();
    let (mut lo, mut hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if all.is_empty() {
        (lo, hi) = (0.0, 1.0);
    }
    if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
        // Every value the same (an exact clock): a window around it.
        let pad = (hi.abs() * 0.05).max(1.0);
        (lo, hi) = (lo - pad, hi + pad);
    }
    let span = hi - lo;
    let x = |v: f64| LEFT + (v - lo) / span * (WIDTH - LEFT - RIGHT);
    let height = TOP + ROW * samples.len() as f64 + BOTTOM;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    );
    s += &format!("<rect width=\"{WIDTH}\" height=\"{height}\" fill=\"white\"/>\n");
    s += &format!(
        "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        escape(&format!("{} ({}; {labels})", c.metric, c.info.describe()))
    );
    let caveat = if c.reading.host_time {
        format!("; {}: host time under emulation, not cycles", c.info.unit)
    } else {
        String::new()
    };
    s += &format!(
        "<text x=\"10\" y=\"36\" fill=\"#555\">{}</text>\n",
        escape(&format!(
            "dots: {what}; tall tick: median; bar: {confidence}% interval of the mean{caveat}"
        ))
    );
    for (i, (name, v)) in samples.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let y = TOP + ROW * (i as f64 + 0.5);
        s += &format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LEFT - 10.0,
            y + 4.0,
            escape(name)
        );
        for (j, val) in v.iter().enumerate() {
            // A small vertical spread, the same on every render, so dots on
            // one value stay visible.
            let jitter = ((j * 7919) % 11) as f64 - 5.0;
            s += &format!(
                "<circle cx=\"{:.2}\" cy=\"{:.2}\" r=\"{DOT_RADIUS}\" fill=\"{colour}\" fill-opacity=\"0.5\"/>\n",
                x(*val),
                y + jitter
            );
        }
        if v.is_empty() {
            s += &format!(
                "<text x=\"{LEFT}\" y=\"{:.1}\" fill=\"#555\">not measured</text>\n",
                y + 4.0
            );
            continue;
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let h = interval(v, confidence);
        s += &format!(
            "<line x1=\"{:.2}\" y1=\"{y:.1}\" x2=\"{:.2}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"4\" stroke-opacity=\"0.6\"/>\n",
            x(mean - h),
            x(mean + h)
        );
        let m = median(v);
        s += &format!(
            "<line x1=\"{:.2}\" y1=\"{:.1}\" x2=\"{:.2}\" y2=\"{:.1}\" stroke=\"black\" stroke-width=\"2\"><title>median {}</title></line>\n",
            x(m),
            y - ROW * 0.4,
            x(m),
            y + ROW * 0.4,
            escape(&fmt_num(m))
        );
    }
    let axis_y = TOP + ROW * samples.len() as f64 + 8.0;
    s += &format!(
        "<line x1=\"{LEFT}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\" stroke=\"black\"/>\n",
        WIDTH - RIGHT
    );
    for k in 0..=4 {
        let v = lo + span * k as f64 / 4.0;
        s += &format!(
            "<line x1=\"{0:.2}\" y1=\"{axis_y}\" x2=\"{0:.2}\" y2=\"{1}\" stroke=\"black\"/><text x=\"{0:.2}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>\n",
            x(v),
            axis_y + 5.0,
            axis_y + 18.0,
            escape(&format_tick(v, span))
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        (LEFT + WIDTH - RIGHT) / 2.0,
        axis_y + 34.0,
        escape(&c.info.unit)
    );
    s += "</svg>\n";
    s
}

/// An axis label: as many decimals as the span needs.
fn format_tick(v: f64, span: f64) -> String {
    let decimals = if span >= 40.0 {
        0
    } else if span >= 4.0 {
        1
    } else {
        3
    };
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare_metric, Reading};
    use crate::ministat::RenderOptions;
    use crate::results::MetricInfo;

    #[test]
    fn a_plot_of_exact_counts_and_of_names_that_need_escaping() {
        let sets = vec![
            ("a<b>".to_string(), vec![24.0; 3]),
            ("c&d".to_string(), vec![46.0; 3]),
        ];
        let info = MetricInfo::per_op("instructions");
        let c = compare_metric(
            "null",
            &sets,
            Reading::of(Some(crate::results::Clock::Icount), true),
            &info,
            &RenderOptions::default(),
        );
        let svg = plot(&c, &sets, "one value per boot", "clock=icount", 95.0);
        assert!(
            svg.contains("a&lt;b&gt;") && svg.contains("c&amp;d"),
            "{svg}"
        );
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains("<title>median 46</title>"), "{svg}");
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        // One value everywhere: the axis still has a width.
        let same = vec![("a".to_string(), vec![5.0; 2])];
        assert!(!plot(&c, &same, "x", "clock=icount", 95.0).contains("NaN"));
    }
}
