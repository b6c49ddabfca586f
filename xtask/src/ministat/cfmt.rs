//! The three C `printf` conversions ministat's text is made of, so that
//! `--classic` matches the C tool character for character.
//!
//! Rust's `{:.N}` and `{:.Ne}` round the exact binary value half-to-even,
//! as glibc's printf does in the default rounding mode; what is left to do
//! here is C's choice between the two styles, its trailing-zero removal and
//! its exponent spelling (`e+05`, never `e5`).

/// `%.{prec}g`: `prec` significant digits, fixed or exponent style as C
/// chooses, trailing zeros removed. NaN prints as glibc prints it (`nan`,
/// or `-nan` when the sign bit is set, as the x86 default NaN has it).
pub fn g(value: f64, prec: usize) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .into();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.into();
    }
    let p = prec.max(1);
    // Round to p significant digits first: the exponent *after* rounding
    // picks the style (C11 7.21.6.1, the `g` conversion).
    let sci = format!("{:.*e}", p - 1, value);
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("Rust's LowerExp always writes an exponent");
    let x: i32 = exp.parse().expect("the exponent is an integer");
    if x < -4 || x >= p as i32 {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_fraction_zeros(mantissa), x.abs())
    } else {
        let decimals = (p as i32 - 1 - x) as usize;
        strip_fraction_zeros(&format!("{value:.decimals$}")).to_string()
    }
}

/// `%{width}.{prec}g`: [`g`] right-aligned in `width` columns.
pub fn g_width(value: f64, width: usize, prec: usize) -> String {
    format!("{:>width$}", g(value, prec))
}

/// `%.1f`.
pub fn f1(value: f64) -> String {
    format!("{value:.1}")
}

/// Drops the zeros at the end of a fraction, and the point if nothing is
/// left after it; a number without a point is returned as it is.
fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings are what glibc's printf prints for the same call.
    #[test]
    fn g_matches_c_printf() {
        assert_eq!(g(0.0, 6), "0");
        assert_eq!(g(-0.0, 6), "-0");
        assert_eq!(g(100.0, 6), "100");
        assert_eq!(g(961.5319, 6), "961.532");
        assert_eq!(g(123456.0, 6), "123456");
        assert_eq!(g(1234567.0, 6), "1.23457e+06");
        assert_eq!(g(1234565.0, 6), "1.23456e+06"); // a tie: half to even
        assert_eq!(g(0.0001, 6), "0.0001");
        assert_eq!(g(0.00001234, 6), "1.234e-05");
        assert_eq!(g(2.5e-300, 6), "2.5e-300");
        assert_eq!(g(999999.5, 6), "1e+06"); // rounding moves the exponent
        assert_eq!(g(0.5, 1), "0.5");
        assert_eq!(g(2.5, 1), "2");
        assert_eq!(g(f64::INFINITY, 6), "inf");
        assert_eq!(g(-f64::NAN, 6), "-nan");
        assert_eq!(g(f64::NAN.copysign(1.0), 6), "nan");
    }

    #[test]
    fn width_and_fixed() {
        assert_eq!(g_width(238.047_614, 13, 8), "    238.04761");
        assert_eq!(g_width(0.001_516_575_1, 13, 8), " 0.0015165751");
        assert_eq!(g_width(36105.6, 13, 8), "      36105.6");
        assert_eq!(f1(95.0), "95.0");
        assert_eq!(f1(99.5), "99.5");
    }
}
