//! .NET-compatible date and time handling for the date functions: a tick-based UTC instant (what ARM's
//! `DateTime` values are), a lenient timestamp parser, the XSD duration parser behind `XmlConvert.ToTimeSpan`, and
//! the .NET standard and custom date format engine with the invariant culture.

use std::fmt::Write as _;

/// 100-nanosecond ticks per second, as in .NET.
pub(super) const TICKS_PER_SECOND: i64 = 10_000_000;
const TICKS_PER_MINUTE: i64 = 60 * TICKS_PER_SECOND;
const TICKS_PER_HOUR: i64 = 60 * TICKS_PER_MINUTE;
const TICKS_PER_DAY: i64 = 24 * TICKS_PER_HOUR;
/// `DateTime.MaxValue.Ticks` (9999-12-31T23:59:59.9999999).
const MAX_TICKS: i64 = 3_155_378_975_999_999_999;
/// Days from 0001-01-01 to 1970-01-01.
const DAYS_TO_UNIX_EPOCH: i64 = 719_162;
const UNIX_EPOCH_TICKS: i64 = DAYS_TO_UNIX_EPOCH * TICKS_PER_DAY;

const DAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// A UTC point in time with .NET `DateTime` range and precision (ticks since 0001-01-01T00:00:00Z). ARM parses
/// with `AdjustToUniversal`, so every value it formats has `DateTimeKind.Utc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct UtcDateTime {
    ticks: i64,
}

/// The calendar fields of a [`UtcDateTime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    /// Ticks within the second (0..=9_999_999).
    fraction: i64,
    /// 0 = Sunday.
    day_of_week: usize,
}

/// Days since 0001-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm, shifted to the .NET epoch).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + DAYS_TO_UNIX_EPOCH
}

/// The date of a day count since 0001-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days - DAYS_TO_UNIX_EPOCH + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        _ => 28,
    }
}

impl UtcDateTime {
    fn from_ticks(ticks: i64) -> Option<UtcDateTime> {
        (0..=MAX_TICKS)
            .contains(&ticks)
            .then_some(UtcDateTime { ticks })
    }

    /// `DateTimeOffset.FromUnixTimeSeconds`: `None` outside years 1..=9999.
    pub(super) fn from_unix_seconds(seconds: i64) -> Option<UtcDateTime> {
        seconds
            .checked_mul(TICKS_PER_SECOND)
            .and_then(|t| t.checked_add(UNIX_EPOCH_TICKS))
            .and_then(UtcDateTime::from_ticks)
    }

    /// Whole seconds since the Unix epoch, rounded down (`DateTimeOffset.ToUnixTimeSeconds`).
    pub(super) fn unix_seconds(self) -> i64 {
        self.ticks.div_euclid(TICKS_PER_SECOND) - UNIX_EPOCH_TICKS / TICKS_PER_SECOND
    }

    /// Adds a signed tick count (`DateTime.Add(TimeSpan)`); `None` when the result leaves the .NET range.
    pub(super) fn add_ticks(self, ticks: i64) -> Option<UtcDateTime> {
        self.ticks
            .checked_add(ticks)
            .and_then(UtcDateTime::from_ticks)
    }

    fn from_parts(
        date: (i64, i64, i64),
        time: (i64, i64, i64, i64),
        offset_minutes: i64,
    ) -> Option<UtcDateTime> {
        let (year, month, day) = date;
        let (hour, minute, second, fraction) = time;
        if !(1..=9999).contains(&year)
            || !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || !(0..24).contains(&hour)
            || !(0..60).contains(&minute)
            || !(0..60).contains(&second)
        {
            return None;
        }
        let ticks = days_from_civil(year, month, day) * TICKS_PER_DAY
            + hour * TICKS_PER_HOUR
            + minute * TICKS_PER_MINUTE
            + second * TICKS_PER_SECOND
            + fraction
            - offset_minutes * TICKS_PER_MINUTE;
        UtcDateTime::from_ticks(ticks)
    }

    fn civil(self) -> Civil {
        let days = self.ticks / TICKS_PER_DAY;
        let in_day = self.ticks % TICKS_PER_DAY;
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: in_day / TICKS_PER_HOUR,
            minute: in_day % TICKS_PER_HOUR / TICKS_PER_MINUTE,
            second: in_day % TICKS_PER_MINUTE / TICKS_PER_SECOND,
            fraction: in_day % TICKS_PER_SECOND,
            // 0001-01-01 was a Monday.
            day_of_week: ((days + 1) % 7) as usize,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing timestamps
// ---------------------------------------------------------------------------------------------------------------

/// A byte cursor over an ASCII timestamp.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Cursor<'a> {
        Cursor {
            bytes: s.as_bytes(),
            pos: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_ignore_case(&mut self, word: &str) -> bool {
        let end = self.pos + word.len();
        match self.bytes.get(self.pos..end) {
            Some(s) if s.eq_ignore_ascii_case(word.as_bytes()) => {
                self.pos = end;
                true
            }
            _ => false,
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// Exactly `n` digits.
    fn digits(&mut self, n: usize) -> Option<i64> {
        let slice = self.bytes.get(self.pos..self.pos + n)?;
        if !slice.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.pos += n;
        Some(
            slice
                .iter()
                .fold(0, |acc, d| acc * 10 + i64::from(d - b'0')),
        )
    }

    /// Between `min` and `max` digits, as many as there are.
    fn digits_between(&mut self, min: usize, max: usize) -> Option<i64> {
        let count = self.bytes[self.pos..]
            .iter()
            .take(max)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if count < min {
            return None;
        }
        self.digits(count)
    }

    /// A fraction after the decimal point, as ticks (first seven digits; later ones are dropped).
    fn fraction(&mut self) -> Option<i64> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = &self.bytes[start..self.pos];
        if digits.is_empty() {
            return None;
        }
        let mut ticks = 0;
        for i in 0..7 {
            ticks = ticks * 10 + digits.get(i).map_or(0, |d| i64::from(d - b'0'));
        }
        Some(ticks)
    }
}

/// Parses the timestamp shapes ARM's `DateTime.Parse` (invariant culture, assume and adjust to UTC) accepts in
/// practice: ISO 8601 extended and basic forms (`2020-04-07T14:53:14.123Z`, `2020-04-07 14:53:14Z`,
/// `20190305T175318Z`, date only, offsets `+02:00`/`+0200`/`+02`), the invariant `M/d/yyyy [h:mm[:ss] [AM|PM]]`
/// shape, and RFC 1123 (`Tue, 07 Apr 2020 14:53:14 GMT`). A value without a zone is taken as UTC.
pub(super) fn parse_datetime(input: &str) -> Option<UtcDateTime> {
    let s = input.trim();
    if !s.is_ascii() {
        return None;
    }
    parse_iso(s)
        .or_else(|| parse_slashed(s))
        .or_else(|| parse_rfc1123(s))
}

fn parse_iso(s: &str) -> Option<UtcDateTime> {
    let mut c = Cursor::new(s);
    let year = c.digits(4)?;
    let extended = c.eat(b'-');
    let month = c.digits(2)?;
    if extended && !c.eat(b'-') {
        return None;
    }
    let day = c.digits(2)?;
    let mut time = (0, 0, 0, 0);
    let before_time = c.pos;
    let separated = if c.eat(b'T') || c.eat(b't') {
        true
    } else if extended {
        // The `u` shape separates date and time with a space.
        c.skip_spaces();
        c.pos > before_time && c.peek().is_some_and(|b| b.is_ascii_digit())
    } else {
        false
    };
    if separated {
        time = parse_clock(&mut c, extended)?;
    } else {
        c.pos = before_time;
    }
    let offset = parse_zone(&mut c)?;
    c.at_end()
        .then(|| UtcDateTime::from_parts((year, month, day), time, offset))
        .flatten()
}

/// `hh:mm[:ss[.f]]` (extended) or `hhmm[ss[.f]]` (basic).
fn parse_clock(c: &mut Cursor<'_>, extended: bool) -> Option<(i64, i64, i64, i64)> {
    let hour = c.digits(2)?;
    if extended && !c.eat(b':') {
        return None;
    }
    let minute = c.digits(2)?;
    let mut second = 0;
    let mut fraction = 0;
    let has_seconds = if extended {
        c.eat(b':')
    } else {
        c.peek().is_some_and(|b| b.is_ascii_digit())
    };
    if has_seconds {
        second = c.digits(2)?;
        if c.eat(b'.') || c.eat(b',') {
            fraction = c.fraction()?;
        }
    }
    Some((hour, minute, second, fraction))
}

/// An optional zone designator: `Z`, ` Z`, `UTC`, `GMT`, `±hh[[:]mm]`. Returns the offset in minutes.
fn parse_zone(c: &mut Cursor<'_>) -> Option<i64> {
    let save = c.pos;
    c.skip_spaces();
    if c.at_end() {
        c.pos = save;
        return Some(0);
    }
    if c.eat(b'Z') || c.eat(b'z') || c.eat_ignore_case("UTC") || c.eat_ignore_case("GMT") {
        return Some(0);
    }
    let sign = match c.peek() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return None,
    };
    c.pos += 1;
    let hours = c.digits(2)?;
    let minutes = if c.eat(b':') {
        c.digits(2)?
    } else {
        c.digits(2).unwrap_or(0)
    };
    if hours > 14 || minutes > 59 {
        return None;
    }
    Some(sign * (hours * 60 + minutes))
}

/// `M/d/yyyy [h:mm[:ss[.f]] [AM|PM]] [zone]`, the invariant culture's general pattern.
fn parse_slashed(s: &str) -> Option<UtcDateTime> {
    let mut c = Cursor::new(s);
    let month = c.digits_between(1, 2)?;
    if !c.eat(b'/') {
        return None;
    }
    let day = c.digits_between(1, 2)?;
    if !c.eat(b'/') {
        return None;
    }
    let year = c.digits(4)?;
    let mut time = (0, 0, 0, 0);
    let save = c.pos;
    c.skip_spaces();
    if c.peek().is_some_and(|b| b.is_ascii_digit()) {
        let mut hour = c.digits_between(1, 2)?;
        if !c.eat(b':') {
            return None;
        }
        let minute = c.digits(2)?;
        let mut second = 0;
        let mut fraction = 0;
        if c.eat(b':') {
            second = c.digits(2)?;
            if c.eat(b'.') {
                fraction = c.fraction()?;
            }
        }
        let before_designator = c.pos;
        c.skip_spaces();
        if c.eat_ignore_case("AM") {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour %= 12;
        } else if c.eat_ignore_case("PM") {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour = hour % 12 + 12;
        } else {
            c.pos = before_designator;
        }
        time = (hour, minute, second, fraction);
    } else {
        c.pos = save;
    }
    let offset = parse_zone(&mut c)?;
    c.at_end()
        .then(|| UtcDateTime::from_parts((year, month, day), time, offset))
        .flatten()
}

/// `ddd, dd MMM yyyy HH:mm:ss GMT` (the `r` format).
fn parse_rfc1123(s: &str) -> Option<UtcDateTime> {
    let mut c = Cursor::new(s);
    let weekday = DAY_NAMES.iter().position(|d| c.eat_ignore_case(&d[..3]))?;
    if !c.eat(b',') {
        return None;
    }
    c.skip_spaces();
    let day = c.digits_between(1, 2)?;
    c.skip_spaces();
    let month = MONTH_NAMES
        .iter()
        .position(|m| c.eat_ignore_case(&m[..3]))
        .map(|m| m as i64 + 1)?;
    c.skip_spaces();
    let year = c.digits(4)?;
    c.skip_spaces();
    let time = parse_clock(&mut c, true)?;
    let offset = parse_zone(&mut c)?;
    if !c.at_end() {
        return None;
    }
    let value = UtcDateTime::from_parts((year, month, day), time, offset)?;
    // .NET rejects a day name that does not match the date.
    (value.civil().day_of_week == weekday).then_some(value)
}

// ---------------------------------------------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------------------------------------------

/// Parses an XSD/ISO 8601 duration the way ARM does (`XmlConvert.ToTimeSpan`): `[-]PnYnMnDTnHnMn[.n]S`, every
/// part optional but at least one present, `T` only before a time part, no weeks. Returns ticks.
///
/// A year counts as 365 days and a month as 30 days (not calendar arithmetic): this is what the real engine
/// does and what Microsoft documents (Azure/bicep#8188, #12853: 2024-01-01 + P1Y = 2024-12-31).
pub(super) fn parse_duration(input: &str) -> Option<i64> {
    let s = input.trim().as_bytes();
    let mut pos = 0;
    let negative = s.first() == Some(&b'-');
    if negative {
        pos += 1;
    }
    if s.get(pos) != Some(&b'P') {
        return None;
    }
    pos += 1;
    let mut total: i128 = 0;
    let mut any = false;
    let mut in_time = false;
    // The designators allowed, in order, before and after `T`.
    let date_units: [(u8, i128); 3] = [
        (b'Y', 365 * TICKS_PER_DAY as i128),
        (b'M', 30 * TICKS_PER_DAY as i128),
        (b'D', TICKS_PER_DAY as i128),
    ];
    let time_units: [(u8, i128); 3] = [
        (b'H', TICKS_PER_HOUR as i128),
        (b'M', TICKS_PER_MINUTE as i128),
        (b'S', TICKS_PER_SECOND as i128),
    ];
    let mut next_unit = 0;
    let mut time_part_seen = false;
    while pos < s.len() {
        if s[pos] == b'T' {
            if in_time {
                return None;
            }
            in_time = true;
            next_unit = 0;
            pos += 1;
            continue;
        }
        let start = pos;
        while pos < s.len() && s[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos == start {
            return None;
        }
        // XsdDuration keeps each part in an int.
        let number: i128 = std::str::from_utf8(&s[start..pos]).ok()?.parse().ok()?;
        if number > i128::from(i32::MAX) {
            return None;
        }
        let mut fraction_ticks: i128 = 0;
        if s.get(pos) == Some(&b'.') {
            // Only seconds may have a fraction.
            pos += 1;
            let fstart = pos;
            while pos < s.len() && s[pos].is_ascii_digit() {
                pos += 1;
            }
            if pos == fstart || !in_time || s.get(pos) != Some(&b'S') {
                return None;
            }
            for i in 0..7 {
                fraction_ticks = fraction_ticks * 10
                    + s.get(fstart + i)
                        .filter(|_| fstart + i < pos)
                        .map_or(0, |d| i128::from(d - b'0'));
            }
        }
        let designator = *s.get(pos)?;
        pos += 1;
        let units = if in_time { &time_units } else { &date_units };
        let offset = units[next_unit..]
            .iter()
            .position(|(d, _)| *d == designator)?;
        let (_, ticks_per_unit) = units[next_unit + offset];
        next_unit += offset + 1;
        total += number * ticks_per_unit + fraction_ticks;
        any = true;
        if in_time {
            time_part_seen = true;
        }
    }
    if !any || (in_time && !time_part_seen) {
        return None;
    }
    let signed = if negative { -total } else { total };
    i64::try_from(signed).ok()
}

// ---------------------------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------------------------

/// Why a .NET format string was rejected (`FormatException` in .NET).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct BadFormat;

/// The invariant culture's expansion of a one-character standard format.
fn standard_pattern(c: char) -> Option<&'static str> {
    Some(match c {
        'd' => "MM/dd/yyyy",
        'D' => "dddd, dd MMMM yyyy",
        'f' => "dddd, dd MMMM yyyy HH:mm",
        'F' => "dddd, dd MMMM yyyy HH:mm:ss",
        'g' => "MM/dd/yyyy HH:mm",
        'G' => "MM/dd/yyyy HH:mm:ss",
        'm' | 'M' => "MMMM dd",
        'o' | 'O' => "yyyy'-'MM'-'dd'T'HH':'mm':'ss'.'fffffffK",
        'r' | 'R' => "ddd, dd MMM yyyy HH':'mm':'ss 'GMT'",
        's' => "yyyy'-'MM'-'dd'T'HH':'mm':'ss",
        't' => "HH:mm",
        'T' => "HH:mm:ss",
        'u' => "yyyy'-'MM'-'dd HH':'mm':'ss'Z'",
        // `U` converts to universal time first; the value already is.
        'U' => "dddd, dd MMMM yyyy HH:mm:ss",
        'y' | 'Y' => "yyyy MMMM",
        _ => return None,
    })
}

/// `DateTime.ToString(format, CultureInfo.InvariantCulture)` for a UTC value. An empty format means `G`; a
/// one-character format is a standard format (unknown ones are an error); anything longer is custom.
pub(super) fn format_datetime(value: UtcDateTime, format: &str) -> Result<String, BadFormat> {
    let mut chars = format.chars();
    let pattern = match (chars.next(), chars.next()) {
        (None, _) => "MM/dd/yyyy HH:mm:ss",
        (Some(c), None) => standard_pattern(c).ok_or(BadFormat)?,
        _ => format,
    };
    format_custom(value.civil(), pattern)
}

fn push_padded(out: &mut String, value: i64, width: usize) {
    let _ = write!(out, "{value:0width$}");
}

/// How many times `pattern[pos]` repeats.
fn repeat_len(pattern: &[char], pos: usize) -> usize {
    pattern[pos..]
        .iter()
        .take_while(|c| **c == pattern[pos])
        .count()
}

/// Reads a quoted literal starting at the quote at `pos`; returns the text and the number of characters used.
fn quoted(pattern: &[char], pos: usize) -> Result<(String, usize), BadFormat> {
    let quote = pattern[pos];
    let mut text = String::new();
    let mut i = pos + 1;
    while i < pattern.len() {
        let c = pattern[i];
        if c == quote {
            return Ok((text, i - pos + 1));
        }
        if c == '\\' {
            i += 1;
            text.push(*pattern.get(i).ok_or(BadFormat)?);
        } else {
            text.push(c);
        }
        i += 1;
    }
    Err(BadFormat)
}

fn format_custom(t: Civil, pattern: &str) -> Result<String, BadFormat> {
    let pattern: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < pattern.len() {
        let c = pattern[i];
        let used = match c {
            'g' => {
                out.push_str("A.D.");
                repeat_len(&pattern, i)
            }
            'h' => {
                let n = repeat_len(&pattern, i);
                let hour = if t.hour % 12 == 0 { 12 } else { t.hour % 12 };
                push_padded(&mut out, hour, n.min(2));
                n
            }
            'H' | 'm' | 's' => {
                let n = repeat_len(&pattern, i);
                let v = match c {
                    'H' => t.hour,
                    'm' => t.minute,
                    _ => t.second,
                };
                push_padded(&mut out, v, n.min(2));
                n
            }
            'f' | 'F' => {
                let n = repeat_len(&pattern, i);
                if n > 7 {
                    return Err(BadFormat);
                }
                let scaled = t.fraction / 10_i64.pow(7 - n as u32);
                let mut digits = format!("{scaled:0n$}");
                if c == 'F' {
                    while digits.ends_with('0') {
                        digits.pop();
                    }
                    if digits.is_empty() && out.ends_with('.') {
                        // .NET drops the separator when an `F` fraction is empty.
                        out.pop();
                    }
                }
                out.push_str(&digits);
                n
            }
            't' => {
                let n = repeat_len(&pattern, i);
                let designator = if t.hour < 12 { "AM" } else { "PM" };
                out.push_str(if n == 1 { &designator[..1] } else { designator });
                n
            }
            'd' => {
                let n = repeat_len(&pattern, i);
                match n {
                    1 | 2 => push_padded(&mut out, t.day, n),
                    3 => out.push_str(&DAY_NAMES[t.day_of_week][..3]),
                    _ => out.push_str(DAY_NAMES[t.day_of_week]),
                }
                n
            }
            'M' => {
                let n = repeat_len(&pattern, i);
                let name = MONTH_NAMES[(t.month - 1) as usize];
                match n {
                    1 | 2 => push_padded(&mut out, t.month, n),
                    3 => out.push_str(&name[..3]),
                    _ => out.push_str(name),
                }
                n
            }
            'y' => {
                let n = repeat_len(&pattern, i);
                if n <= 2 {
                    push_padded(&mut out, t.year % 100, n);
                } else {
                    push_padded(&mut out, t.year, n);
                }
                n
            }
            'z' => {
                // A UTC value has a zero offset.
                let n = repeat_len(&pattern, i);
                out.push_str(match n {
                    1 => "+0",
                    2 => "+00",
                    _ => "+00:00",
                });
                n
            }
            'K' => {
                out.push('Z');
                1
            }
            ':' | '/' => {
                // The invariant time and date separators.
                out.push(c);
                1
            }
            '\'' | '"' => {
                let (text, n) = quoted(&pattern, i)?;
                out.push_str(&text);
                n
            }
            '%' => {
                // `%x` formats `x` as a one-character custom pattern.
                match pattern.get(i + 1) {
                    Some('%') | None => return Err(BadFormat),
                    Some(next) => out.push_str(&format_custom(t, &next.to_string())?),
                }
                2
            }
            '\\' => {
                out.push(*pattern.get(i + 1).ok_or(BadFormat)?);
                2
            }
            other => {
                out.push(other);
                1
            }
        };
        i += used;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(s: &str) -> UtcDateTime {
        parse_datetime(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    fn fmt(s: &str, f: &str) -> String {
        format_datetime(at(s), f).unwrap_or_else(|_| panic!("{f} should be valid"))
    }

    #[test]
    fn calendar_round_trip_edges() {
        assert_eq!(days_from_civil(1, 1, 1), 0);
        assert_eq!(days_from_civil(1970, 1, 1), DAYS_TO_UNIX_EPOCH);
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        assert_eq!(
            civil_from_days(days_from_civil(9999, 12, 31)),
            (9999, 12, 31)
        );
        assert_eq!(at("2019-03-05T17:53:18Z").civil().day_of_week, 2);
    }

    #[test]
    fn parses_iso_shapes() {
        let base = at("2020-04-07T14:53:14Z");
        assert_eq!(at("2020-04-07 14:53:14Z"), base);
        assert_eq!(at("20200407T145314Z"), base);
        assert_eq!(at("2020-04-07T16:53:14+02:00"), base);
        assert_eq!(at("2020-04-07T16:53:14+0200"), base);
        assert_eq!(at("2020-04-07T14:53:14"), base);
        assert_eq!(at("4/7/2020 2:53:14 PM"), base);
        assert_eq!(at("04/07/2020 14:53:14"), base);
        assert_eq!(at("Tue, 07 Apr 2020 14:53:14 GMT"), base);
        assert_eq!(at("2020-04-07T14:53:14.5Z").ticks - base.ticks, 5_000_000);
        assert_eq!(at("2020-04-07"), at("2020-04-07T00:00:00Z"));
    }

    #[test]
    fn rejects_bad_timestamps() {
        for s in [
            "",
            "2020-13-01",
            "2021-02-29",
            "2020-04-07T25:00:00Z",
            "2020-04-07X",
            "Wed, 07 Apr 2020 14:53:14 GMT",
            "not a date",
            "0000-01-01",
        ] {
            assert!(parse_datetime(s).is_none(), "{s} should not parse");
        }
    }

    #[test]
    fn durations_follow_xml_convert() {
        assert_eq!(parse_duration("P1D"), Some(TICKS_PER_DAY));
        assert_eq!(parse_duration("-P9D"), Some(-9 * TICKS_PER_DAY));
        assert_eq!(parse_duration("P1Y"), Some(365 * TICKS_PER_DAY));
        assert_eq!(parse_duration("P1M"), Some(30 * TICKS_PER_DAY));
        assert_eq!(parse_duration("PT1M"), Some(TICKS_PER_MINUTE));
        assert_eq!(
            parse_duration("P1DT2H3M4.5S"),
            Some(
                TICKS_PER_DAY
                    + 2 * TICKS_PER_HOUR
                    + 3 * TICKS_PER_MINUTE
                    + 45 * TICKS_PER_SECOND / 10
            )
        );
        for bad in [
            "", "P", "PT", "P1W", "1D", "P1H", "PT1D", "P1D1Y", "P1.5D", "+P1D", "p1d", "P1DT",
            "PT1S1M",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn standard_formats_use_the_invariant_culture() {
        let t = "2019-03-05T17:53:18.1234567Z";
        assert_eq!(fmt(t, "d"), "03/05/2019");
        assert_eq!(fmt(t, "D"), "Tuesday, 05 March 2019");
        assert_eq!(fmt(t, "f"), "Tuesday, 05 March 2019 17:53");
        assert_eq!(fmt(t, "F"), "Tuesday, 05 March 2019 17:53:18");
        assert_eq!(fmt(t, "g"), "03/05/2019 17:53");
        assert_eq!(fmt(t, "G"), "03/05/2019 17:53:18");
        assert_eq!(fmt(t, ""), "03/05/2019 17:53:18");
        assert_eq!(fmt(t, "M"), "March 05");
        assert_eq!(fmt(t, "m"), "March 05");
        assert_eq!(fmt(t, "o"), "2019-03-05T17:53:18.1234567Z");
        assert_eq!(fmt(t, "O"), "2019-03-05T17:53:18.1234567Z");
        assert_eq!(fmt(t, "r"), "Tue, 05 Mar 2019 17:53:18 GMT");
        assert_eq!(fmt(t, "R"), "Tue, 05 Mar 2019 17:53:18 GMT");
        assert_eq!(fmt(t, "s"), "2019-03-05T17:53:18");
        assert_eq!(fmt(t, "t"), "17:53");
        assert_eq!(fmt(t, "T"), "17:53:18");
        assert_eq!(fmt(t, "u"), "2019-03-05 17:53:18Z");
        assert_eq!(fmt(t, "U"), "Tuesday, 05 March 2019 17:53:18");
        assert_eq!(fmt(t, "y"), "2019 March");
        assert_eq!(fmt(t, "Y"), "2019 March");
        assert_eq!(format_datetime(at(t), "q"), Err(BadFormat));
    }

    #[test]
    fn custom_tokens() {
        let t = "2019-03-05T07:03:08.0120000Z";
        assert_eq!(fmt(t, "yyyyMMddTHHmmssZ"), "20190305T070308Z");
        assert_eq!(fmt(t, "M d"), "3 5");
        assert_eq!(fmt(t, "yy y yyy yyyyy"), "19 19 2019 02019");
        assert_eq!(fmt(t, "MMM MMMM MMMMM"), "Mar March March");
        assert_eq!(fmt(t, "ddd dddd"), "Tue Tuesday");
        assert_eq!(fmt(t, "h hh H HH m mm s ss"), "7 07 7 07 3 03 8 08");
        assert_eq!(fmt("2019-03-05T00:00:00Z", "h tt t"), "12 AM A");
        assert_eq!(fmt("2019-03-05T13:00:00Z", "hh tt t"), "01 PM P");
        assert_eq!(fmt(t, "f ff fff ffff fffffff"), "0 01 012 0120 0120000");
        assert_eq!(fmt(t, "F FF FFF FFFF FFFFFFF"), " 01 012 012 012");
        assert_eq!(fmt("2019-03-05T07:03:08Z", "ss.FFF"), "08");
        assert_eq!(fmt(t, "K z zz zzz"), "Z +0 +00 +00:00");
        assert_eq!(fmt(t, "'yyyy' \"MM\" \\d %d gg"), "yyyy MM d 5 A.D.");
        assert_eq!(fmt(t, "HH:mm/dd"), "07:03/05");
        for bad in ["ffffffff", "'open", "%", "%%", "ab\\"] {
            assert_eq!(format_datetime(at(t), bad), Err(BadFormat), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn round_trips_through_the_o_format(ticks in 0..=MAX_TICKS) {
            let value = UtcDateTime { ticks };
            let text = format_datetime(value, "o").map_err(|_| TestCaseError::fail("o is valid"))?;
            prop_assert_eq!(parse_datetime(&text), Some(value));
        }

        #[test]
        fn parser_never_panics(s in "\\PC{0,40}") {
            let _ = parse_datetime(&s);
            let _ = parse_duration(&s);
        }

        #[test]
        fn formatter_never_panics(f in "\\PC{0,20}", ticks in 0..=MAX_TICKS) {
            let _ = format_datetime(UtcDateTime { ticks }, &f);
        }
    }
}
