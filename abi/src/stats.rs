//! The summary statistics of a benchmark's per-batch values, computed in
//! the guest (kernel or user program) before a `bench` record goes out.
//!
//! One implementation for every side, so a figure from the kernel and one
//! from a user program mean the same thing.

/// Summary statistics of per-operation values (or per-batch rates).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p25: f64,
    pub median: f64,
    pub mean: f64,
    pub p75: f64,
    pub max: f64,
    pub sd: f64,
    /// Values further than [`OUTLIER_MADS`] scaled MADs from the median.
    pub outliers: usize,
}

/// How many scaled median absolute deviations make an outlier.
pub const OUTLIER_MADS: f64 = 3.0;
/// Scales a MAD to estimate σ for normally distributed data (1 / Φ⁻¹(3/4)).
pub const MAD_TO_SIGMA: f64 = 1.4826;

/// Quantile by linear interpolation between closest ranks (`v` sorted).
fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let lo = pos as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Newton's square root (no libm in the guest).
fn sqrt(x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let mut r = if x > 1.0 { x / 2.0 } else { 1.0 };
    for _ in 0..60 {
        r = 0.5 * (r + x / r);
    }
    r
}

fn distance(a: f64, b: f64) -> f64 {
    if a > b {
        a - b
    } else {
        b - a
    }
}

/// Summarises `vals` (sorted in place). `scratch` must be at least as long.
pub fn summarize(vals: &mut [f64], scratch: &mut [f64]) -> Summary {
    let n = vals.len();
    if n == 0 {
        return Summary::default();
    }
    vals.sort_unstable_by(|a, b| a.total_cmp(b));
    let mean = vals.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let median = quantile(vals, 0.5);
    let dev = &mut scratch[..n];
    for (d, v) in dev.iter_mut().zip(vals.iter()) {
        *d = distance(*v, median);
    }
    dev.sort_unstable_by(|a, b| a.total_cmp(b));
    let mad = quantile(dev, 0.5) * MAD_TO_SIGMA;
    let outliers = vals
        .iter()
        .filter(|&&v| {
            let d = distance(v, median);
            if mad == 0.0 {
                d > 0.0
            } else {
                d > OUTLIER_MADS * mad
            }
        })
        .count();
    Summary {
        n,
        min: vals[0],
        p25: quantile(vals, 0.25),
        median,
        mean,
        p75: quantile(vals, 0.75),
        max: vals[n - 1],
        sd: sqrt(var),
        outliers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_small_set() {
        let mut v = [4.0, 1.0, 3.0, 2.0, 100.0];
        let mut s = [0.0; 5];
        let x = summarize(&mut v, &mut s);
        assert_eq!((x.n, x.min, x.median, x.max), (5, 1.0, 3.0, 100.0));
        assert_eq!((x.p25, x.p75, x.mean), (2.0, 4.0, 22.0));
        assert_eq!(x.outliers, 1);
        assert!((x.sd - 43.6176).abs() < 1e-3, "{}", x.sd);
        let mut even = [1.0, 2.0];
        assert_eq!(summarize(&mut even, &mut s).median, 1.5);
        assert_eq!(summarize(&mut [], &mut s), Summary::default());
    }
}
