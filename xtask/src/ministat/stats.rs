//! The numbers behind ministat's table and its Student's t test, in the two
//! variants [`Formula`] names. Each computation follows the C tool's order
//! of floating-point operations, so that the last printed digit agrees too.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Which generation of ministat's formulas to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Formula {
    /// Today's FreeBSD: the median of an even count is the mean of the two
    /// middle values; the variance is summed in two passes around the mean;
    /// the relative interval comes from each set's own relative spread; and,
    /// beyond FreeBSD, Student's t is the exact quantile for any degrees of
    /// freedom and any confidence level.
    #[default]
    Modern,
    /// Debian's `ministat` 20150715, FreeBSD's tool before the changes
    /// above (the percentage's came in November 2016): the median of an
    /// even count is the upper middle value; the variance comes from the
    /// running sums of x and x²; the relative interval is the absolute one
    /// divided by the first set's mean; t comes from ministat's 3-decimal
    /// table.
    Classic,
}

/// A set's summary statistics: ministat's table row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub mean: f64,
    /// Sample variance (divided by n - 1).
    pub variance: f64,
    /// `variance.sqrt()`; NaN when [`Formula::Classic`]'s running sums give
    /// a variance a rounding error below zero, as the C tool prints it.
    pub stddev: f64,
}

impl Summary {
    /// The summary of `values`, given in input order (the order matters to
    /// the last bits of the sums, as it does in the C tool). An empty slice
    /// gives NaN everywhere.
    #[allow(dead_code)] // API for the coming `cargo xtask bench`.
    pub fn of(values: &[f64], formula: Formula) -> Summary {
        Summary::of_sorted(values, &sorted(values), formula)
    }

    /// [`Summary::of`] when the caller already holds `sorted(values)`.
    pub(crate) fn of_sorted(values: &[f64], sorted: &[f64], formula: Formula) -> Summary {
        let n = values.len();
        if n == 0 {
            return Summary::from_moments(0, f64::NAN, f64::NAN);
        }
        let count = n as f64;
        let sum = values.iter().fold(0.0, |s, &v| s + v);
        let mean = sum / count;
        let variance = match formula {
            Formula::Classic => {
                let sum_sq = values.iter().fold(0.0, |s, &v| s + v * v);
                (sum_sq - sum * sum / count) / (count - 1.0)
            }
            Formula::Modern => {
                let ss = sorted.iter().fold(0.0, |s, &v| s + (v - mean) * (v - mean));
                ss / (count - 1.0)
            }
        };
        let half = n / 2;
        let median = match formula {
            Formula::Modern if n.is_multiple_of(2) => (sorted[half] + sorted[half - 1]) / 2.0,
            _ => sorted[half],
        };
        Summary {
            n,
            min: sorted[0],
            max: sorted[n - 1],
            median,
            mean,
            variance,
            stddev: variance.sqrt(),
        }
    }

    /// A summary known only by its size, mean and standard deviation (as a
    /// published table gives it); min, max and median are NaN. Enough for
    /// [`compare_summaries`].
    pub fn from_moments(n: usize, mean: f64, stddev: f64) -> Summary {
        Summary {
            n,
            min: f64::NAN,
            max: f64::NAN,
            median: f64::NAN,
            mean,
            variance: stddev * stddev,
            stddev,
        }
    }
}

/// The summary of `values` with today's formulas ([`Formula::Modern`]).
#[allow(dead_code)] // API for the coming `cargo xtask bench`.
pub fn summarize(values: &[f64]) -> Summary {
    Summary::of(values, Formula::Modern)
}

/// `values` in ascending order, as C's `qsort` with ministat's comparison
/// leaves them: -0 and +0 compare equal (kept in input order), NaNs go to
/// the ends instead of wherever the C sort happens to drop them.
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    let key = |x: f64| if x == 0.0 { 0.0 } else { x };
    v.sort_by(|a, b| key(*a).total_cmp(&key(*b)));
    v
}

/// A second set measured against a first (the baseline): ministat's
/// "Difference at 95.0% confidence" block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// The confidence level, in percent.
    pub confidence: f64,
    /// Degrees of freedom: n1 + n2 - 2.
    pub df: usize,
    /// The two-sided Student's t quantile used.
    pub t: f64,
    /// mean(other) - mean(baseline).
    pub difference: f64,
    /// Half-width of the confidence interval around `difference`.
    pub interval: f64,
    /// `difference` as a percentage of the baseline's mean.
    pub percent: f64,
    /// Half-width of the interval around `percent`, in percent.
    pub percent_interval: f64,
    /// The pooled standard deviation.
    pub pooled_stddev: f64,
    /// Whether |difference| exceeds `interval`: a difference is proven.
    pub proven: bool,
}

/// Compares `other` against `baseline` (both in input order) at
/// `confidence` percent, as ministat compares each later file with the
/// first. Needs at least two values in each for a meaningful answer.
#[allow(dead_code)] // API for the coming `cargo xtask bench`.
pub fn compare(baseline: &[f64], other: &[f64], confidence: f64, formula: Formula) -> Comparison {
    compare_summaries(
        &Summary::of(baseline, formula),
        &Summary::of(other, formula),
        confidence,
        formula,
    )
}

/// [`compare`] from the two summaries alone (only n, mean and variance are
/// used).
pub fn compare_summaries(
    baseline: &Summary,
    other: &Summary,
    confidence: f64,
    formula: Formula,
) -> Comparison {
    // Names and order as in ministat's Relative(): `d` the later set, `r`
    // the reference.
    let (nd, nr) = (other.n as f64, baseline.n as f64);
    let (vd, vr) = (other.variance, baseline.variance);
    let (ad, ar) = (other.mean, baseline.mean);
    let df = (other.n + baseline.n).saturating_sub(2);
    let t = t_for(confidence, df, formula);

    let mut pooled = (nd - 1.0) * vd + (nr - 1.0) * vr;
    pooled /= df as f64;
    let pooled = pooled.sqrt();
    let s = pooled * (1.0 / nd + 1.0 / nr).sqrt();
    let difference = ad - ar;
    let interval = t * s;
    let percent_interval = match formula {
        Formula::Classic => interval * 100.0 / ar,
        Formula::Modern => {
            // The variance of the ratio of the means, each set's spread
            // taken relative to its own mean.
            let mut re = (nd - 1.0) * vd + (nr - 1.0) * vr * (ad * ad) / (ar * ar);
            re *= (nd + nr) / (nd * nr * (nd + nr - 2.0));
            t * re.sqrt() * 100.0 / ar
        }
    };
    Comparison {
        confidence,
        df,
        t,
        difference,
        interval,
        percent: difference * 100.0 / ar,
        percent_interval,
        pooled_stddev: pooled,
        proven: difference.abs() > interval,
    }
}

/// The t quantile `formula` uses: exact for [`Formula::Modern`]; for
/// [`Formula::Classic`], ministat's table at its six levels and exact at
/// any other level (where the C tool refuses to run).
pub fn t_for(confidence: f64, df: usize, formula: Formula) -> f64 {
    match formula {
        Formula::Classic => {
            classic_t(confidence, df).unwrap_or_else(|| student_t(confidence, df as f64))
        }
        Formula::Modern => student_t(confidence, df as f64),
    }
}

/// The two-sided Student's t critical value: the t with
/// P(|T| <= t) = confidence / 100 for `df` degrees of freedom (any real
/// df > 0, any level strictly between 0 and 100; NaN otherwise).
pub fn student_t(confidence: f64, df: f64) -> f64 {
    if !(confidence > 0.0 && confidence < 100.0 && df > 0.0) {
        return f64::NAN;
    }
    upper_quantile(0.5 + confidence / 200.0, df)
}

/// Past this many degrees of freedom the Cornish-Fisher series below is
/// exact to about 1e-14, while statrs' beta inversion loses digits (1e-8
/// at 3000 df, 1e-5 at 1e5) and, near 1e9, stops returning.
const SERIES_DF: f64 = 1000.0;

/// The t with P(T <= t) = p, for 1/2 < p < 1.
fn upper_quantile(p: f64, df: f64) -> f64 {
    if df <= SERIES_DF {
        return StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |d| d.inverse_cdf(p));
    }
    // Cornish-Fisher expansion of t around the normal quantile
    // (Abramowitz & Stegun 26.7.5), to the 1/df^4 term.
    let x = normal_quantile(p);
    let x2 = x * x;
    let g1 = x * (x2 + 1.0) / 4.0;
    let g2 = x * ((5.0 * x2 + 16.0) * x2 + 3.0) / 96.0;
    let g3 = x * (((3.0 * x2 + 19.0) * x2 + 17.0) * x2 - 15.0) / 384.0;
    let g4 = x * ((((79.0 * x2 + 776.0) * x2 + 1482.0) * x2 - 1920.0) * x2 - 945.0) / 92160.0;
    x + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df
}

fn normal_quantile(p: f64) -> f64 {
    Normal::standard().inverse_cdf(p)
}

/// The confidence levels ministat's table has, in percent.
pub const CLASSIC_LEVELS: [f64; 6] = [80.0, 90.0, 95.0, 98.0, 99.0, 99.5];

/// The upper-tail point each table column really holds. The last column,
/// labelled 99.5 %, holds the one-sided 99.9 % point (two-sided 99.8 %):
/// Debian's ministat uses 7.173 there at 4 degrees of freedom, where the
/// two-sided 99.5 % point is 5.598.
const CLASSIC_ONE_SIDED: [f64; 6] = [0.90, 0.95, 0.975, 0.99, 0.995, 0.999];

/// The table has rows for 1 to 100 degrees of freedom; beyond, it uses
/// its row for infinity (the normal quantiles).
const CLASSIC_MAX_DF: usize = 100;

/// Where the table differs from the exact quantile rounded to three
/// decimals: (df, column, table value). Found by running Debian's
/// `ministat` at every level for every df from 4 to 100 (and a few past
/// 100) and reading t back from the interval it printed; every other entry
/// it used is the rounded exact value. The C tool cannot reach df 1 to 3
/// (each set needs 3 points); there we give the rounded exact value.
const CLASSIC_ROUNDING_EXCEPTIONS: &[(usize, usize, f64)] = &[
    (7, 5, 4.782),
    (8, 5, 4.499),
    (9, 5, 4.296),
    (10, 5, 4.143),
    (11, 5, 4.024),
    (12, 5, 3.929),
];

/// ministat's table value for `confidence` and `df`, or `None` when the
/// level is not one of [`CLASSIC_LEVELS`].
pub fn classic_t(confidence: f64, df: usize) -> Option<f64> {
    let column = CLASSIC_LEVELS.iter().position(|&l| l == confidence)?;
    if let Some(&(_, _, v)) = CLASSIC_ROUNDING_EXCEPTIONS
        .iter()
        .find(|&&(d, c, _)| d == df && c == column)
    {
        return Some(v);
    }
    let p = CLASSIC_ONE_SIDED[column];
    let exact = if df > CLASSIC_MAX_DF || df == 0 {
        normal_quantile(p)
    } else {
        upper_quantile(p, df as f64)
    };
    Some(round3(exact))
}

/// Rounds to three decimals. `k / 1000` is the double nearest the decimal
/// k/1000, the same double the literal would give.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x` printed with `digits` decimals is `expect`.
    fn prints(x: f64, digits: usize, expect: &str) {
        assert_eq!(format!("{x:.digits$}"), expect, "{x}");
    }

    // Two-sided critical values from published t tables (e.g. NIST/SEMATECH
    // e-Handbook 1.3.6.7.2, which lists one-sided upper points).
    #[test]
    fn t_quantiles_match_published_tables() {
        let table: [(f64, [&str; 3]); 7] = [
            // df: 90 %, 95 %, 99 %
            (1.0, ["6.314", "12.706", "63.657"]),
            (2.0, ["2.920", "4.303", "9.925"]),
            (5.0, ["2.015", "2.571", "4.032"]),
            (10.0, ["1.812", "2.228", "3.169"]),
            (30.0, ["1.697", "2.042", "2.750"]),
            (100.0, ["1.660", "1.984", "2.626"]),
            (1000.0, ["1.646", "1.962", "2.581"]),
        ];
        for (df, row) in table {
            for (level, expect) in [90.0, 95.0, 99.0].into_iter().zip(row) {
                prints(student_t(level, df), 3, expect);
            }
        }
        // 80 % and 99.9 %, and the normal limit.
        prints(student_t(80.0, 1.0), 3, "3.078");
        prints(student_t(80.0, 10.0), 3, "1.372");
        prints(student_t(99.9, 1.0), 2, "636.62");
        prints(student_t(99.9, 10.0), 3, "4.587");
        prints(student_t(95.0, 1e9), 4, "1.9600");
        prints(student_t(99.0, 1e12), 4, "2.5758");
    }

    #[test]
    fn t_quantiles_any_level_and_df() {
        // Known closed forms: df 1 is Cauchy, t = tan(pi * c / 2);
        // df 2 has t = c * sqrt(2 / (1 - c^2)).
        for c in [0.5, 0.8, 0.9731, 0.999] {
            let cauchy = (std::f64::consts::PI * c / 2.0).tan();
            let t = student_t(c * 100.0, 1.0);
            assert!(
                (t / cauchy - 1.0).abs() < 1e-9,
                "df 1 at {c}: {t} vs {cauchy}"
            );
            let two = c * (2.0 / (1.0 - c * c)).sqrt();
            let t = student_t(c * 100.0, 2.0);
            assert!((t / two - 1.0).abs() < 1e-9, "df 2 at {c}: {t} vs {two}");
        }
        // Fractional df, and the hand-over to the series is seamless.
        assert!(student_t(95.0, 7.5) < student_t(95.0, 7.0));
        assert!(student_t(95.0, 7.5) > student_t(95.0, 8.0));
        for level in [80.0, 95.0, 99.5] {
            let beta = StudentsT::new(0.0, 1.0, SERIES_DF)
                .unwrap()
                .inverse_cdf(0.5 + level / 200.0);
            let series = upper_quantile(0.5 + level / 200.0, SERIES_DF + 1e-9);
            assert!((beta - series).abs() < 1e-9, "{beta} vs {series}");
        }
        assert!(student_t(0.0, 5.0).is_nan());
        assert!(student_t(100.0, 5.0).is_nan());
        assert!(student_t(95.0, 0.0).is_nan());
    }

    #[test]
    fn classic_table() {
        assert_eq!(classic_t(95.0, 1), Some(12.706));
        assert_eq!(classic_t(95.0, 28), Some(2.048));
        assert_eq!(classic_t(80.0, 100), Some(1.290));
        assert_eq!(classic_t(95.0, 101), Some(1.960));
        assert_eq!(classic_t(99.5, 4), Some(7.173));
        assert_eq!(classic_t(99.5, 10), Some(4.143));
        assert_eq!(classic_t(99.5, 13), Some(3.852));
        assert_eq!(classic_t(99.5, 1000), Some(3.090));
        assert_eq!(classic_t(97.0, 10), None);
        assert_eq!(t_for(97.0, 10, Formula::Classic), student_t(97.0, 10.0));
    }

    #[test]
    fn summaries() {
        let v = [5.0, 1.0, 4.0, 2.0, 3.0, 6.0];
        let m = Summary::of(&v, Formula::Modern);
        let c = Summary::of(&v, Formula::Classic);
        assert_eq!((m.n, m.min, m.max, m.mean), (6, 1.0, 6.0, 3.5));
        assert_eq!(m.median, 3.5);
        assert_eq!(c.median, 4.0); // upper middle
        assert_eq!(m.variance, 3.5);
        assert_eq!(c.variance, 3.5);
        assert_eq!(Summary::of(&v[..5], Formula::Classic).median, 3.0);
        // Catastrophic cancellation in the running sums, not in two passes
        // (tests/data/ministat/huge2.dat; Debian's ministat prints -nan).
        let big = [
            1000000000.6,
            1000000001.2,
            1000000001.0,
            1000000000.7,
            1000000000.8,
            1000000001.3,
            1000000001.2,
            1000000000.7,
        ];
        let sd = Summary::of(&big, Formula::Modern).stddev;
        assert!((sd - 0.272_226_3).abs() < 1e-6, "{sd}");
        assert!(Summary::of(&big, Formula::Classic).stddev.is_nan());
        assert!(summarize(&[]).mean.is_nan());
    }

    /// FreeBSD's classic example block, from its summary statistics alone.
    /// The means and deviations are rounded as printed, so the results may
    /// differ from the printed ones by a unit in the last place.
    #[test]
    fn classic_block_from_summaries() {
        let x = Summary::from_moments(15, 19449.863, 165.25167);
        let plus = Summary::from_moments(15, 20411.395, 76.260797);
        let c = compare_summaries(&x, &plus, 95.0, Formula::Classic);
        assert_eq!(c.df, 28);
        assert_eq!(c.t, 2.048);
        assert!(c.proven);
        let near = |got: f64, printed: f64, unit: f64| {
            assert!((got - printed).abs() <= unit, "{got} vs {printed}");
        };
        near(c.difference, 961.531, 0.001);
        near(c.interval, 96.2398, 0.0001);
        near(c.percent, 4.94364, 0.00001);
        near(c.percent_interval, 0.494809, 0.000001);
        near(c.pooled_stddev, 128.693, 0.001);
        use super::super::cfmt::g;
        assert_eq!(g(c.interval, 6), "96.2398");
        assert_eq!(g(c.percent_interval, 6), "0.494809");
        assert_eq!(g(c.pooled_stddev, 6), "128.693");
    }

    /// Today's formulas on two small sets, worked by hand:
    ///   a = 10 12 14 16 (n 4): mean 13, median (12+14)/2 = 13,
    ///       squares about the mean 9+1+1+9 = 20, variance 20/3
    ///   b = 20 22 24 26 28 30 (n 6): mean 25, median (24+26)/2 = 25,
    ///       squares 25+9+1+1+9+25 = 70, variance 14
    ///   df 8, pooled variance (20 + 70) / 8 = 11.25, s_p = 3.354102
    ///   s = sqrt(11.25 * (1/4 + 1/6)) = sqrt(4.6875) = 2.165064
    ///   t(95 %, 8) = 2.306004 (two-sided), interval = t * s = 4.992645
    ///   difference 12, percent 12 / 13 = 92.307692 %
    ///   relative: (6-1)*14 + (4-1)*(20/3)*25^2/13^2 = 70 + 20*625/169
    ///             = 143.964497; times 10 / (24 * 8) = 7.498151;
    ///             sqrt 2.738275, times t = 6.314474, / 13 = 48.572876 %
    ///   classic relative interval instead: 2.306 * s * 100 / 13 = 38.404896 %
    #[test]
    fn modern_formulas_by_hand() {
        let a = [14.0, 10.0, 16.0, 12.0];
        let b = [30.0, 20.0, 28.0, 22.0, 26.0, 24.0];
        let sa = summarize(&a);
        assert_eq!((sa.median, sa.mean), (13.0, 13.0));
        assert!((sa.variance - 20.0 / 3.0).abs() < 1e-12);
        let c = compare(&a, &b, 95.0, Formula::Modern);
        assert_eq!(c.df, 8);
        prints(c.t, 6, "2.306004");
        prints(c.pooled_stddev, 6, "3.354102");
        prints(c.difference, 6, "12.000000");
        prints(c.interval, 6, "4.992645");
        prints(c.percent, 6, "92.307692");
        prints(c.percent_interval, 6, "48.572876");
        assert!(c.proven);
        // The classic formulas on the same data: the table's t and the
        // absolute interval over the baseline mean.
        let k = compare(&a, &b, 95.0, Formula::Classic);
        assert_eq!(k.t, 2.306);
        prints(k.percent_interval, 6, "38.404896");
    }
}
