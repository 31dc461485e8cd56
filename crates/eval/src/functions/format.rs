//! .NET composite formatting for `format()`: `{index[,alignment][:formatString]}` items with `{{`/`}}` escapes, and
//! the invariant-culture numeric format strings .NET applies to integers and doubles: the standard specifiers (`C`,
//! `D`, `E`, `F`, `G`, `N`, `P`, `R`, `X`, `B`, each with an optional precision) and custom patterns (`0.00`,
//! `#,##0`, `0.0E+00`, `0%`, sections separated by `;`, quoted literals).

use std::fmt;

/// Refuse precisions, widths and indexes at or above this (as .NET does for widths and indexes), so a format string
/// cannot ask for gigabytes of padding.
const MAX_COMPOSITE_NUMBER: usize = 1_000_000;

/// Precisions above this are refused; .NET would accept up to 999,999,999 and allocate accordingly.
const MAX_PRECISION: usize = 1_000;

/// Significant digits .NET keeps for doubles in custom format strings.
const DOUBLE_CUSTOM_FORMAT_DIGITS: usize = 15;

/// Significant digits before `G`/`R` switches doubles to scientific notation.
const DOUBLE_GENERAL_DIGITS: i32 = 15;

/// One `format()` argument after ARM's conversion: text is inserted as-is (format strings do not apply to it),
/// numbers go through .NET numeric formatting.
pub(super) enum FormatArg {
    Text(String),
    Int(i64),
    Float(f64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FormatError {
    /// The composite format string itself is malformed.
    Syntax,
    /// `{n}` names an argument that was not passed.
    IndexOutOfRange,
    /// The numeric format specifier is not one .NET knows for that type (`D` on a double, `Q`).
    BadSpecifier,
    /// A precision beyond [`MAX_PRECISION`].
    PrecisionTooLarge,
    /// The result would pass the byte limit given to [`composite_within`].
    TooLong,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Syntax => f.write_str("Input string was not in a correct format."),
            FormatError::IndexOutOfRange => f.write_str(
                "Index (zero based) must be greater than or equal to zero and less than the size of the argument list.",
            ),
            FormatError::BadSpecifier => f.write_str("Format specifier was invalid."),
            FormatError::PrecisionTooLarge => {
                write!(f, "The format precision must not exceed {MAX_PRECISION}.")
            }
            FormatError::TooLong => f.write_str("The formatted string is too long."),
        }
    }
}

/// Formats `format` with `args` like .NET's `String.Format(CultureInfo.InvariantCulture, ...)`.
#[cfg(test)]
pub(super) fn composite(format: &str, args: &[FormatArg]) -> Result<String, FormatError> {
    composite_within(format, args, usize::MAX)
}

/// [`composite`], stopping with [`FormatError::TooLong`] as soon as the result passes `max_bytes` (a format
/// string may repeat a large argument many times).
pub(super) fn composite_within(
    format: &str,
    args: &[FormatArg],
    max_bytes: usize,
) -> Result<String, FormatError> {
    let chars: Vec<char> = format.chars().collect();
    let mut out = String::with_capacity(format.len());
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '{' if chars.get(i + 1) == Some(&'{') => {
                out.push('{');
                i += 2;
            }
            '}' if chars.get(i + 1) == Some(&'}') => {
                out.push('}');
                i += 2;
            }
            '}' => return Err(FormatError::Syntax),
            '{' => i = format_item(&chars, i + 1, args, &mut out, max_bytes)?,
            c => {
                out.push(c);
                i += 1;
            }
        }
        if out.len() > max_bytes {
            return Err(FormatError::TooLong);
        }
    }
    Ok(out)
}

/// Formats one `{index[,alignment][:format]}` item starting just after its `{`; returns the position after `}`.
fn format_item(
    chars: &[char],
    mut i: usize,
    args: &[FormatArg],
    out: &mut String,
    max_bytes: usize,
) -> Result<usize, FormatError> {
    let index = read_number(chars, &mut i)?;
    skip_spaces(chars, &mut i);
    let mut width = 0;
    let mut left_align = false;
    if chars.get(i) == Some(&',') {
        i += 1;
        skip_spaces(chars, &mut i);
        if chars.get(i) == Some(&'-') {
            left_align = true;
            i += 1;
        }
        width = read_number(chars, &mut i)?;
        skip_spaces(chars, &mut i);
    }
    let mut spec = String::new();
    if chars.get(i) == Some(&':') {
        i += 1;
        loop {
            match chars.get(i) {
                None | Some('{') => return Err(FormatError::Syntax),
                Some('}') => break,
                Some(&c) => {
                    spec.push(c);
                    i += 1;
                }
            }
        }
    }
    if chars.get(i) != Some(&'}') {
        return Err(FormatError::Syntax);
    }
    i += 1;
    let text = match args.get(index).ok_or(FormatError::IndexOutOfRange)? {
        FormatArg::Text(s) => s.clone(),
        FormatArg::Int(v) => format_int(*v, &spec)?,
        FormatArg::Float(x) => format_float(*x, &spec)?,
    };
    // Alignment counts UTF-16 code units, like every .NET string length.
    let pad = width.saturating_sub(text.encode_utf16().count());
    if out.len().saturating_add(pad).saturating_add(text.len()) > max_bytes {
        return Err(FormatError::TooLong);
    }
    if left_align {
        out.push_str(&text);
        out.extend(std::iter::repeat_n(' ', pad));
    } else {
        out.extend(std::iter::repeat_n(' ', pad));
        out.push_str(&text);
    }
    Ok(i)
}

fn read_number(chars: &[char], i: &mut usize) -> Result<usize, FormatError> {
    let start = *i;
    let mut n: usize = 0;
    while let Some(d) = chars.get(*i).and_then(|c| c.to_digit(10)) {
        n = n * 10 + d as usize;
        if n >= MAX_COMPOSITE_NUMBER {
            return Err(FormatError::Syntax);
        }
        *i += 1;
    }
    if *i == start {
        return Err(FormatError::Syntax);
    }
    Ok(n)
}

fn skip_spaces(chars: &[char], i: &mut usize) {
    while chars.get(*i) == Some(&' ') {
        *i += 1;
    }
}

/// `long.ToString(spec, CultureInfo.InvariantCulture)`.
pub(super) fn format_int(value: i64, spec: &str) -> Result<String, FormatError> {
    let Some((letter, precision)) = standard_specifier(spec)? else {
        return Ok(custom(Digits::from_int(value), spec));
    };
    let digits = Digits::from_int(value);
    let upper = letter.is_ascii_uppercase();
    Ok(match letter.to_ascii_uppercase() {
        'G' | 'R' => match precision {
            Some(p) if p > 0 && letter.eq_ignore_ascii_case(&'G') => {
                let mut d = digits;
                d.round(p as i32);
                general(&d, p as i32, if upper { 'E' } else { 'e' })
            }
            _ => value.to_string(),
        },
        'D' => {
            let magnitude = value.unsigned_abs().to_string();
            let zeros = precision.unwrap_or(0).saturating_sub(magnitude.len());
            let sign = if value < 0 { "-" } else { "" };
            format!("{sign}{}{magnitude}", "0".repeat(zeros))
        }
        'X' => {
            let hex = if upper {
                format!("{:X}", value as u64)
            } else {
                format!("{:x}", value as u64)
            };
            left_zero_pad(hex, precision)
        }
        'B' => left_zero_pad(format!("{:b}", value as u64), precision),
        _ => fixed_family(digits, letter, precision)?,
    })
}

/// `double.ToString(spec, CultureInfo.InvariantCulture)` (.NET Core 3.0+ semantics: shortest round-trip by default,
/// exact decimal expansion rounded half away from zero when a precision is given).
pub(super) fn format_float(value: f64, spec: &str) -> Result<String, FormatError> {
    let standard = standard_specifier(spec)?;
    if matches!(standard, Some((l, _)) if matches!(l.to_ascii_uppercase(), 'D' | 'X' | 'B')) {
        return Err(FormatError::BadSpecifier);
    }
    if !value.is_finite() {
        return Ok(non_finite(value).to_string());
    }
    let Some((letter, precision)) = standard else {
        return Ok(custom(
            Digits::from_float_significant(value, DOUBLE_CUSTOM_FORMAT_DIGITS),
            spec,
        ));
    };
    let upper = letter.is_ascii_uppercase();
    Ok(match letter.to_ascii_uppercase() {
        'G' | 'R' => match precision {
            Some(p) if p > 0 && letter.eq_ignore_ascii_case(&'G') => {
                let mut d = Digits::from_float_exact(value);
                d.round(p as i32);
                general(&d, p as i32, if upper { 'E' } else { 'e' })
            }
            _ => general(
                &Digits::from_float_shortest(value),
                DOUBLE_GENERAL_DIGITS,
                if upper { 'E' } else { 'e' },
            ),
        },
        _ => fixed_family(Digits::from_float_exact(value), letter, precision)?,
    })
}

/// `double.ToString()` with the invariant culture: what ARM shows for a float in `string()` and JSON text.
pub(crate) fn double_to_string(value: f64) -> String {
    if value.is_finite() {
        general(
            &Digits::from_float_shortest(value),
            DOUBLE_GENERAL_DIGITS,
            'E',
        )
    } else {
        non_finite(value).to_string()
    }
}

fn non_finite(value: f64) -> &'static str {
    if value.is_nan() {
        "NaN"
    } else if value > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

/// Splits a standard format string into its letter and precision; `None` means a custom format string. An empty
/// string means `G`.
fn standard_specifier(spec: &str) -> Result<Option<(char, Option<usize>)>, FormatError> {
    let mut chars = spec.chars();
    let Some(letter) = chars.next() else {
        return Ok(Some(('G', None)));
    };
    let rest = chars.as_str();
    if !letter.is_ascii_alphabetic() || !rest.chars().all(|c| c.is_ascii_digit()) {
        return Ok(None);
    }
    let precision = if rest.is_empty() {
        None
    } else {
        let digits = rest.trim_start_matches('0');
        if digits.len() > 4 {
            return Err(FormatError::PrecisionTooLarge);
        }
        let p: usize = digits.parse().unwrap_or(0);
        if p > MAX_PRECISION {
            return Err(FormatError::PrecisionTooLarge);
        }
        Some(p)
    };
    if !matches!(
        letter.to_ascii_uppercase(),
        'C' | 'D' | 'E' | 'F' | 'G' | 'N' | 'P' | 'R' | 'X' | 'B'
    ) {
        return Err(FormatError::BadSpecifier);
    }
    Ok(Some((letter, precision)))
}

fn left_zero_pad(digits: String, precision: Option<usize>) -> String {
    let zeros = precision.unwrap_or(0).saturating_sub(digits.len());
    format!("{}{digits}", "0".repeat(zeros))
}

/// The specifiers that round to a number of decimals: `C`, `E`, `F`, `N`, `P`.
fn fixed_family(
    mut d: Digits,
    letter: char,
    precision: Option<usize>,
) -> Result<String, FormatError> {
    // The invariant culture's NumberDecimalDigits, PercentDecimalDigits and CurrencyDecimalDigits are all 2.
    let decimals = precision.unwrap_or(2) as i32;
    let sign = if d.negative { "-" } else { "" };
    Ok(match letter.to_ascii_uppercase() {
        'F' => {
            d.round(d.scale + decimals);
            format!("{sign}{}", fixed(&d, decimals, false))
        }
        'N' => {
            d.round(d.scale + decimals);
            format!("{sign}{}", fixed(&d, decimals, true))
        }
        'P' => {
            if !d.is_zero() {
                d.scale += 2;
            }
            d.round(d.scale + decimals);
            // Invariant PercentPositivePattern 0 ("n %") and PercentNegativePattern 0 ("-n %").
            format!("{sign}{} %", fixed(&d, decimals, true))
        }
        'C' => {
            d.round(d.scale + decimals);
            let body = fixed(&d, decimals, true);
            // Invariant currency symbol "¤", CurrencyPositivePattern 0 ("¤n"), CurrencyNegativePattern 0 ("(¤n)").
            if d.negative {
                format!("(¤{body})")
            } else {
                format!("¤{body}")
            }
        }
        'E' => {
            let decimals = precision.unwrap_or(6) as i32;
            d.round(decimals + 1);
            let exp_char = if letter.is_ascii_uppercase() {
                'E'
            } else {
                'e'
            };
            format!("{sign}{}", scientific(&d, decimals, exp_char))
        }
        _ => return Err(FormatError::BadSpecifier),
    })
}

/// A decimal number as .NET's formatter sees it: significant digits without leading or trailing zeros (empty for
/// zero) and `scale`, the position of the decimal point relative to the first digit: `0.d₁d₂d₃… × 10^scale`.
#[derive(Clone, Debug)]
struct Digits {
    negative: bool,
    digits: Vec<u8>,
    scale: i32,
}

impl Digits {
    fn from_int(value: i64) -> Digits {
        let mut digits: Vec<u8> = value
            .unsigned_abs()
            .to_string()
            .bytes()
            .map(|b| b - b'0')
            .collect();
        let scale = digits.len() as i32;
        while digits.last() == Some(&0) {
            digits.pop();
        }
        Digits {
            negative: value < 0,
            scale: if digits.is_empty() { 0 } else { scale },
            digits,
        }
    }

    /// The exact decimal expansion of a finite double (at most 767 significant digits).
    fn from_float_exact(value: f64) -> Digits {
        Digits::from_scientific(value.is_sign_negative(), &format!("{:.767e}", value.abs()))
    }

    /// The shortest digits that read back as the same double.
    fn from_float_shortest(value: f64) -> Digits {
        Digits::from_scientific(value.is_sign_negative(), &format!("{:e}", value.abs()))
    }

    /// The double rounded to `significant` digits.
    fn from_float_significant(value: f64, significant: usize) -> Digits {
        let precision = significant.saturating_sub(1);
        Digits::from_scientific(
            value.is_sign_negative(),
            &format!("{:.precision$e}", value.abs()),
        )
    }

    /// Reads Rust's `{:e}` output (`d.ddde±x`, one non-zero digit before the point unless the value is zero).
    fn from_scientific(negative: bool, text: &str) -> Digits {
        let (mantissa, exponent) = text.split_once('e').unwrap_or((text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let mut digits: Vec<u8> = mantissa
            .bytes()
            .filter(u8::is_ascii_digit)
            .map(|b| b - b'0')
            .collect();
        while digits.last() == Some(&0) {
            digits.pop();
        }
        Digits {
            negative,
            scale: if digits.is_empty() { 0 } else { exponent + 1 },
            digits,
        }
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// Keeps the first `keep` significant digits, rounding half away from zero (as .NET's `RoundNumber` does).
    fn round(&mut self, keep: i32) {
        if keep <= 0 {
            let round_up = keep == 0 && self.digits.first().is_some_and(|&d| d >= 5);
            self.digits.clear();
            if round_up {
                self.digits.push(1);
                self.scale += 1;
            }
        } else if (keep as usize) < self.digits.len() {
            let round_up = self.digits[keep as usize] >= 5;
            self.digits.truncate(keep as usize);
            if round_up {
                while self.digits.last() == Some(&9) {
                    self.digits.pop();
                }
                match self.digits.last_mut() {
                    Some(d) => *d += 1,
                    None => {
                        self.digits.push(1);
                        self.scale += 1;
                    }
                }
            }
        }
        while self.digits.last() == Some(&0) {
            self.digits.pop();
        }
        if self.digits.is_empty() {
            self.scale = 0;
        }
    }

    /// The digit at `index` (0-based from the first significant digit); zero outside the stored digits.
    fn digit_char(&self, index: i32) -> char {
        if index < 0 {
            return '0';
        }
        self.digits
            .get(index as usize)
            .map_or('0', |&d| (b'0' + d) as char)
    }
}

/// Integer part (grouped by thousands when asked) and `decimals` fraction digits, without a sign.
fn fixed(d: &Digits, decimals: i32, grouped: bool) -> String {
    let mut integer = String::new();
    if d.scale > 0 {
        for i in 0..d.scale {
            integer.push(d.digit_char(i));
        }
    } else {
        integer.push('0');
    }
    let mut out = if grouped {
        group_thousands(&integer)
    } else {
        integer
    };
    if decimals > 0 {
        out.push('.');
        for k in 0..decimals {
            out.push(d.digit_char(d.scale + k));
        }
    }
    out
}

fn group_thousands(integer: &str) -> String {
    let len = integer.len();
    let mut out = String::with_capacity(len + len / 3);
    for (i, c) in integer.chars().enumerate() {
        if i > 0 && (len - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `d.ddddddE+ddd`: the `E` specifier (always signed, at least three exponent digits).
fn scientific(d: &Digits, decimals: i32, exp_char: char) -> String {
    let mut out = String::new();
    out.push(d.digit_char(0));
    if decimals > 0 {
        out.push('.');
        for k in 1..=decimals {
            out.push(d.digit_char(k));
        }
    }
    let exponent = if d.is_zero() { 0 } else { d.scale - 1 };
    out.push(exp_char);
    out.push(if exponent < 0 { '-' } else { '+' });
    out.push_str(&format!("{:03}", exponent.unsigned_abs()));
    out
}

/// The `G` layout: plain digits unless the exponent is at least `max_digits` or below -5, then `d.dddE+dd`.
fn general(d: &Digits, max_digits: i32, exp_char: char) -> String {
    let mut out = String::new();
    if d.negative {
        out.push('-');
    }
    let scientific = !d.is_zero() && (d.scale > max_digits || d.scale < -3);
    if scientific {
        out.push(d.digit_char(0));
        if d.digits.len() > 1 {
            out.push('.');
            for i in 1..d.digits.len() as i32 {
                out.push(d.digit_char(i));
            }
        }
        let exponent = d.scale - 1;
        out.push(exp_char);
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exponent.unsigned_abs()));
    } else {
        if d.scale > 0 {
            for i in 0..d.scale {
                out.push(d.digit_char(i));
            }
        } else {
            out.push('0');
        }
        let len = d.digits.len() as i32;
        if len > d.scale {
            out.push('.');
            for i in d.scale.min(0)..len - d.scale.max(0) {
                out.push(d.digit_char(d.scale.max(0) + i));
            }
        }
    }
    out
}

/// The start of section `wanted` (0 positive, 1 negative, 2 zero) of a `;`-separated custom format, or 0 when that
/// section is missing or empty.
fn find_section(format: &[char], wanted: usize) -> usize {
    if wanted == 0 {
        return 0;
    }
    let mut section = 0;
    let mut i = 0;
    while i < format.len() {
        match format[i] {
            q @ ('\'' | '"') => {
                i += 1;
                while i < format.len() && format[i] != q {
                    i += 1;
                }
            }
            '\\' => i += 1,
            ';' => {
                section += 1;
                if section == wanted {
                    let start = i + 1;
                    return match format.get(start) {
                        None | Some(';') => 0,
                        Some(_) => start,
                    };
                }
            }
            _ => {}
        }
        i += 1;
    }
    0
}

/// What a custom format section asks for, found by a first scan over it.
struct SectionLayout {
    /// Digit placeholders (`0` and `#`) before the exponent.
    digit_count: i32,
    /// Placeholders before the decimal point.
    decimal_pos: i32,
    /// Placeholder index of the first `0` (`i32::MAX` when there is none).
    first_zero: i32,
    /// Placeholder count up to and including the last `0`.
    last_zero: i32,
    scientific: bool,
    thousand_separators: bool,
    /// Powers of ten to apply: `%` (+2), `‰` (+3), scaling commas before the point (-3 each).
    scale_adjust: i32,
}

fn scan_section(format: &[char], start: usize) -> SectionLayout {
    let mut layout = SectionLayout {
        digit_count: 0,
        decimal_pos: -1,
        first_zero: i32::MAX,
        last_zero: 0,
        scientific: false,
        thousand_separators: false,
        scale_adjust: 0,
    };
    let mut thousand_pos = -1;
    let mut thousand_count = 0;
    let mut i = start;
    while i < format.len() {
        let c = format[i];
        i += 1;
        match c {
            ';' => break,
            '#' => layout.digit_count += 1,
            '0' => {
                if layout.first_zero == i32::MAX {
                    layout.first_zero = layout.digit_count;
                }
                layout.digit_count += 1;
                layout.last_zero = layout.digit_count;
            }
            '.' if layout.decimal_pos < 0 => layout.decimal_pos = layout.digit_count,
            ',' if layout.digit_count > 0 && layout.decimal_pos < 0 => {
                if thousand_pos >= 0 {
                    if thousand_pos == layout.digit_count {
                        thousand_count += 1;
                        continue;
                    }
                    layout.thousand_separators = true;
                }
                thousand_pos = layout.digit_count;
                thousand_count = 1;
            }
            '%' => layout.scale_adjust += 2,
            '‰' => layout.scale_adjust += 3,
            q @ ('\'' | '"') => {
                while i < format.len() && format[i] != q {
                    i += 1;
                }
                i += 1;
            }
            '\\' => i += 1,
            'E' | 'e' => {
                let next = format.get(i).copied();
                let after = format.get(i + 1).copied();
                if next == Some('0') || (matches!(next, Some('+' | '-')) && after == Some('0')) {
                    i += 1;
                    while format.get(i) == Some(&'0') {
                        i += 1;
                    }
                    layout.scientific = true;
                }
            }
            _ => {}
        }
    }
    if layout.decimal_pos < 0 {
        layout.decimal_pos = layout.digit_count;
    }
    if thousand_pos >= 0 {
        if thousand_pos == layout.decimal_pos {
            layout.scale_adjust -= thousand_count * 3;
        } else {
            layout.thousand_separators = true;
        }
    }
    layout
}

/// Formats with a custom numeric format string (.NET's "custom numeric format strings").
fn custom(mut number: Digits, format: &str) -> String {
    let fmt: Vec<char> = format.chars().collect();
    let wanted = if number.is_zero() {
        2
    } else if number.negative {
        1
    } else {
        0
    };
    let mut section = find_section(&fmt, wanted);
    let layout = loop {
        let layout = scan_section(&fmt, section);
        if !number.is_zero() {
            number.scale += layout.scale_adjust;
            let keep = if layout.scientific {
                layout.digit_count
            } else {
                number.scale + layout.digit_count - layout.decimal_pos
            };
            number.round(keep);
            if number.is_zero() {
                // A value that rounds to zero uses the zero section when there is one.
                let zero_section = find_section(&fmt, 2);
                if zero_section != section {
                    section = zero_section;
                    continue;
                }
            }
        }
        break layout;
    };

    let first_zero = if layout.first_zero < layout.decimal_pos {
        layout.decimal_pos - layout.first_zero
    } else {
        0
    };
    let last_zero = if layout.last_zero > layout.decimal_pos {
        layout.decimal_pos - layout.last_zero
    } else {
        0
    };
    let (mut dig_pos, mut adjust) = if layout.scientific {
        (layout.decimal_pos, 0)
    } else {
        (
            number.scale.max(layout.decimal_pos),
            number.scale - layout.decimal_pos,
        )
    };
    let mut scientific = layout.scientific;

    let mut out = String::new();
    // The negative sign is implied only in the first section; other sections spell their own.
    if number.negative && section == 0 && !number.is_zero() {
        out.push('-');
    }
    let mut next_digit: usize = 0;
    let mut decimal_written = false;
    let separator_after =
        |dig_pos: i32| layout.thousand_separators && dig_pos > 1 && (dig_pos - 1) % 3 == 0;
    let mut i = section;
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        if c == ';' {
            break;
        }
        if adjust > 0 && matches!(c, '#' | '0' | '.') {
            // More integer digits than placeholders: they all go where the first placeholder is.
            while adjust > 0 {
                match number.digits.get(next_digit) {
                    Some(&d) => {
                        out.push((b'0' + d) as char);
                        next_digit += 1;
                    }
                    None => out.push('0'),
                }
                if separator_after(dig_pos) {
                    out.push(',');
                }
                dig_pos -= 1;
                adjust -= 1;
            }
        }
        match c {
            '#' | '0' => {
                let digit = if adjust < 0 {
                    adjust += 1;
                    (dig_pos <= first_zero).then_some('0')
                } else if let Some(&d) = number.digits.get(next_digit) {
                    next_digit += 1;
                    Some((b'0' + d) as char)
                } else {
                    (dig_pos > last_zero).then_some('0')
                };
                if let Some(digit) = digit {
                    out.push(digit);
                    if separator_after(dig_pos) {
                        out.push(',');
                    }
                }
                dig_pos -= 1;
            }
            '.' => {
                if dig_pos != 0 || decimal_written {
                    continue;
                }
                if last_zero < 0
                    || (layout.decimal_pos < layout.digit_count && next_digit < number.digits.len())
                {
                    out.push('.');
                    decimal_written = true;
                }
            }
            ',' => {}
            q @ ('\'' | '"') => {
                while i < fmt.len() && fmt[i] != q {
                    out.push(fmt[i]);
                    i += 1;
                }
                i += 1;
            }
            '\\' => {
                if let Some(&escaped) = fmt.get(i) {
                    out.push(escaped);
                    i += 1;
                }
            }
            'E' | 'e' => {
                let next = fmt.get(i).copied();
                let after = fmt.get(i + 1).copied();
                if scientific
                    && (next == Some('0')
                        || (matches!(next, Some('+' | '-')) && after == Some('0')))
                {
                    let always_sign = next == Some('+');
                    let mut zeros = usize::from(next == Some('0'));
                    i += 1;
                    while fmt.get(i) == Some(&'0') {
                        zeros += 1;
                        i += 1;
                    }
                    let exponent = if number.is_zero() {
                        0
                    } else {
                        number.scale - layout.decimal_pos
                    };
                    out.push(c);
                    if exponent < 0 {
                        out.push('-');
                    } else if always_sign {
                        out.push('+');
                    }
                    out.push_str(&format!(
                        "{:0width$}",
                        exponent.unsigned_abs(),
                        width = zeros.min(10)
                    ));
                    scientific = false;
                } else {
                    out.push(c);
                    if let Some(sign @ ('+' | '-')) = next {
                        out.push(sign);
                        i += 1;
                    }
                    while fmt.get(i) == Some(&'0') {
                        out.push('0');
                        i += 1;
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: i64, spec: &str) -> String {
        format_int(v, spec).expect("valid format")
    }

    fn float(v: f64, spec: &str) -> String {
        format_float(v, spec).expect("valid format")
    }

    #[test]
    fn standard_integer_formats() {
        assert_eq!(int(8175133, "N0"), "8,175,133");
        assert_eq!(int(8175133, "N"), "8,175,133.00");
        assert_eq!(int(-1234, "N1"), "-1,234.0");
        assert_eq!(int(123, "D"), "123");
        assert_eq!(int(123, "D6"), "000123");
        assert_eq!(int(-123, "D6"), "-000123");
        assert_eq!(int(255, "X"), "FF");
        assert_eq!(int(255, "x4"), "00ff");
        assert_eq!(int(-1, "X"), "FFFFFFFFFFFFFFFF");
        assert_eq!(int(5, "B8"), "00000101");
        assert_eq!(int(1234, "F"), "1234.00");
        assert_eq!(int(1234, "F0"), "1234");
        assert_eq!(int(8175133, "E"), "8.175133E+006");
        assert_eq!(int(8175133, "e2"), "8.18e+006");
        assert_eq!(int(0, "E2"), "0.00E+000");
        assert_eq!(int(1, "P"), "100.00 %");
        assert_eq!(int(-1, "P0"), "-100 %");
        assert_eq!(int(1234, "C"), "¤1,234.00");
        assert_eq!(int(-1234, "C0"), "(¤1,234)");
        assert_eq!(int(12345, "G"), "12345");
        assert_eq!(int(12345, "G2"), "1.2E+04");
        assert_eq!(int(12345, "g3"), "1.23e+04");
        assert_eq!(int(12000, "G2"), "1.2E+04");
        assert_eq!(int(123, "G5"), "123");
        assert_eq!(int(-42, "R"), "-42");
        assert_eq!(int(i64::MIN, "D"), "-9223372036854775808");
        assert_eq!(int(i64::MIN, "N0"), "-9,223,372,036,854,775,808");
    }

    #[test]
    fn custom_integer_formats() {
        assert_eq!(int(1234567, "#,##0"), "1,234,567");
        assert_eq!(int(0, "#,##0.00"), "0.00");
        assert_eq!(int(42, "0.00"), "42.00");
        assert_eq!(int(42, "00000"), "00042");
        assert_eq!(int(42, "#"), "42");
        assert_eq!(int(0, "#"), "");
        assert_eq!(int(-42, "0"), "-42");
        assert_eq!(int(-42, "0;(0)"), "(42)");
        assert_eq!(int(0, "0;(0);'zero'"), "zero");
        assert_eq!(int(1234567, "#,##0,K"), "1,235K");
        assert_eq!(int(1234567890, "0,,"), "1235");
        assert_eq!(int(12345, "0.00E+00"), "1.23E+04");
        assert_eq!(int(12345, "0e0"), "1e4");
        assert_eq!(int(5, "0%"), "500%");
        assert_eq!(int(5, "'#'0\\#"), "#5#");
        assert_eq!(int(123, "(###) ##-##"), "() 1-23");
        assert_eq!(int(7, "Item-0"), "Item-7");
    }

    #[test]
    fn float_formats() {
        assert_eq!(float(0.25, ""), "0.25");
        assert_eq!(float(1.0, ""), "1");
        assert_eq!(float(1e15, ""), "1E+15");
        assert_eq!(float(1e14, ""), "100000000000000");
        assert_eq!(float(0.0001, ""), "0.0001");
        assert_eq!(float(0.00001, ""), "1E-05");
        assert_eq!(float(-2.5, "R"), "-2.5");
        assert_eq!(float(0.125, "F2"), "0.13");
        assert_eq!(float(2.675, "F2"), "2.67");
        assert_eq!(float(1234.5678, "N2"), "1,234.57");
        assert_eq!(float(0.5, "P1"), "50.0 %");
        assert_eq!(float(1234.5678, "E2"), "1.23E+003");
        assert_eq!(float(1234.5678, "G3"), "1.23E+03");
        assert_eq!(float(1234.5678, "0.00"), "1234.57");
        assert_eq!(float(0.5, "0"), "1");
        assert_eq!(float(-0.001, "0.00"), "0.00");
        assert_eq!(float(0.1 + 0.2, "0.################"), "0.3");
        assert_eq!(float(f64::NAN, "N2"), "NaN");
        assert_eq!(float(f64::NEG_INFINITY, ""), "-Infinity");
        assert_eq!(format_float(1.5, "D"), Err(FormatError::BadSpecifier));
        assert_eq!(format_float(1.5, "X2"), Err(FormatError::BadSpecifier));
    }

    #[test]
    fn double_to_string_matches_dotnet() {
        assert_eq!(double_to_string(1.5), "1.5");
        assert_eq!(double_to_string(-0.0), "-0");
        assert_eq!(
            double_to_string(123456789012345680.0),
            "1.2345678901234568E+17"
        );
        assert_eq!(double_to_string(1e-7), "1E-07");
        assert_eq!(double_to_string(0.001234), "0.001234");
    }

    #[test]
    fn specifier_errors() {
        assert_eq!(format_int(1, "Q"), Err(FormatError::BadSpecifier));
        assert_eq!(format_int(1, "Z2"), Err(FormatError::BadSpecifier));
        assert_eq!(format_int(1, "D1001"), Err(FormatError::PrecisionTooLarge));
        assert_eq!(
            format_int(1, "D99999999999"),
            Err(FormatError::PrecisionTooLarge)
        );
    }

    proptest::proptest! {
        #[test]
        fn composite_never_panics(format in "[{}0-9,:a-zA-Z#.;%' -]{0,16}") {
            let args = [FormatArg::Int(-1234567), FormatArg::Float(0.125), FormatArg::Text("x".into())];
            let _ = composite(&format, &args);
        }

        #[test]
        fn numeric_specs_never_panic(spec in "[0#.,;%eE+\\\\'\"a-zA-Z-]{0,10}", i in proptest::num::i64::ANY, x in proptest::num::f64::ANY) {
            let _ = format_int(i, &spec);
            let _ = format_float(x, &spec);
        }

        #[test]
        fn doubles_round_trip_through_their_text(x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO) {
            let text = double_to_string(x);
            proptest::prop_assert_eq!(text.parse::<f64>().ok(), Some(x), "{}", text);
        }

        #[test]
        fn standard_integer_formats_agree_with_plain_rendering(v in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(int(v, "D"), v.to_string());
            proptest::prop_assert_eq!(int(v, "N0").replace(',', ""), v.to_string());
            proptest::prop_assert_eq!(int(v, "0"), v.to_string());
            proptest::prop_assert_eq!(int(v, "F0"), v.to_string());
        }
    }

    #[test]
    fn composite_formatting() {
        let args = [
            FormatArg::Text("a".into()),
            FormatArg::Int(42),
            FormatArg::Float(0.5),
        ];
        let f = |s: &str| composite(s, &args);
        assert_eq!(f("{0}-{1}-{2}").as_deref(), Ok("a-42-0.5"));
        assert_eq!(f("{{{1}}}").as_deref(), Ok("{42}"));
        assert_eq!(f("[{0,3}][{0,-3}]").as_deref(), Ok("[  a][a  ]"));
        assert_eq!(f("{1,6:N1}|{1 , -5 :D3}|").as_deref(), Ok("  42.0|042  |"));
        assert_eq!(f("{0:N2}").as_deref(), Ok("a"));
        assert_eq!(f("{2:P0}").as_deref(), Ok("50 %"));
        assert_eq!(f("{3}"), Err(FormatError::IndexOutOfRange));
        for bad in [
            "{",
            "}",
            "{0",
            "{a}",
            "{0,}",
            "{0:{}",
            "{-1}",
            "x}y",
            "{1000000}",
        ] {
            assert_eq!(f(bad), Err(FormatError::Syntax), "{bad:?}");
        }
        assert_eq!(f("{0,1000000}"), Err(FormatError::Syntax));
    }
}
