//! ARM's time formats: ISO 8601 durations as .NET writes them (`PT1.2970875S`, `P1DT2H`) and UTC
//! timestamps with seven fractional digits (`2024-05-01T10:20:30.1234567Z`).
//!
//! Both formatters work at .NET's tick resolution (100 ns) and truncate below it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NANOS_PER_TICK: u32 = 100;

/// Formats a duration the way ARM reports `duration` (.NET `XmlConvert.ToString(TimeSpan)`): days, then a
/// `T` part with hours, minutes and seconds; zero components are left out, fractional seconds have up to
/// seven digits without trailing zeros, and zero is `PT0S`.
pub fn format_duration(duration: Duration) -> String {
    let total_seconds = duration.as_secs();
    let ticks = duration.subsec_nanos() / NANOS_PER_TICK;
    let days = total_seconds / 86_400;
    let hours = (total_seconds / 3_600) % 24;
    let minutes = (total_seconds / 60) % 60;
    let seconds = total_seconds % 60;

    let mut out = String::from("P");
    if days > 0 {
        out.push_str(&format!("{days}D"));
    }
    if hours > 0 || minutes > 0 || seconds > 0 || ticks > 0 {
        out.push('T');
        if hours > 0 {
            out.push_str(&format!("{hours}H"));
        }
        if minutes > 0 {
            out.push_str(&format!("{minutes}M"));
        }
        if seconds > 0 || ticks > 0 {
            out.push_str(&seconds.to_string());
            if ticks > 0 {
                let fraction = format!("{ticks:07}");
                out.push('.');
                out.push_str(fraction.trim_end_matches('0'));
            }
            out.push('S');
        }
    } else if days == 0 {
        out.push_str("T0S");
    }
    out
}

/// Why a duration string could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an ISO 8601 duration such as 'PT1.5S' or 'P7D'")]
pub struct DurationParseError(String);

/// Reads an ISO 8601 duration with days, hours, minutes and (fractional) seconds, e.g. `P7D`, `PT1H30M`,
/// `PT1.2970875S`. Weeks (`W`) are accepted; years and months are not (their length is not fixed). A day
/// count after the `T` (`PT1D12H`, as in one stack example) is accepted as days.
pub fn parse_duration(text: &str) -> Result<Duration, DurationParseError> {
    let error = || DurationParseError(text.to_owned());
    let rest = text.strip_prefix(['P', 'p']).ok_or_else(error)?;
    if rest.is_empty() {
        return Err(error());
    }
    let mut total = Duration::ZERO;
    let mut in_time = false;
    let mut number = String::new();
    let mut any_component = false;
    for c in rest.chars() {
        match c {
            'T' | 't' if !in_time && number.is_empty() => in_time = true,
            '0'..='9' | '.' | ',' => number.push(if c == ',' { '.' } else { c }),
            unit => {
                if number.is_empty() {
                    return Err(error());
                }
                let seconds_per_unit: u64 = match (unit.to_ascii_uppercase(), in_time) {
                    ('W', false) => 604_800,
                    ('D', _) => 86_400,
                    ('H', true) => 3_600,
                    ('M', true) => 60,
                    ('S', true) => 1,
                    _ => return Err(error()),
                };
                let component = decimal_times(&number, seconds_per_unit).ok_or_else(error)?;
                total = total.checked_add(component).ok_or_else(error)?;
                number.clear();
                any_component = true;
            }
        }
    }
    if !number.is_empty() || !any_component {
        return Err(error());
    }
    Ok(total)
}

/// `number` (digits with at most one `.`) times `unit` seconds, exact to the nanosecond.
fn decimal_times(number: &str, unit: u64) -> Option<Duration> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    // Nanoseconds of the fraction: its first nine digits, right-padded with zeros.
    let nanos: u64 = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0, |acc, digit| acc * 10 + u64::from(digit - b'0'));
    Duration::from_secs(whole.checked_mul(unit)?)
        .checked_add(Duration::from_nanos(nanos.checked_mul(unit)?))
}

/// Formats a point in time as ARM writes timestamps: UTC, seven fractional digits, `Z`.
pub fn format_timestamp(time: SystemTime) -> String {
    let (seconds, nanos) = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => (after.as_secs() as i64, after.subsec_nanos()),
        Err(before) => {
            let before = before.duration();
            let mut seconds = -(before.as_secs() as i64);
            let mut nanos = before.subsec_nanos();
            if nanos > 0 {
                seconds -= 1;
                nanos = 1_000_000_000 - nanos;
            }
            (seconds, nanos)
        }
    };
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:07}Z",
        second_of_day / 3_600,
        (second_of_day / 60) % 60,
        second_of_day % 60,
        nanos / NANOS_PER_TICK
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_format_like_dotnet() {
        let cases = [
            (Duration::ZERO, "PT0S"),
            (Duration::from_nanos(1_297_087_500), "PT1.2970875S"),
            (Duration::from_millis(1_500), "PT1.5S"),
            (Duration::from_nanos(50), "PT0S"),
            (Duration::from_nanos(100), "PT0.0000001S"),
            (Duration::from_secs(60), "PT1M"),
            (Duration::from_secs(3_723), "PT1H2M3S"),
            (Duration::from_secs(86_400), "P1D"),
            (Duration::from_secs(86_400 + 43_200), "P1DT12H"),
            (Duration::from_secs(86_400 * 2 + 5), "P2DT5S"),
        ];
        for (duration, expected) in cases {
            // 50 ns truncates to zero ticks, which .NET prints as zero.
            assert_eq!(format_duration(duration), expected, "{duration:?}");
        }
    }

    #[test]
    fn durations_parse_back() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1_297_087_500),
            Duration::from_secs(3_723),
            Duration::from_secs(86_400 * 3 + 61),
        ] {
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
        assert_eq!(
            parse_duration("P7D").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(
            parse_duration("PT1D12H").unwrap(),
            Duration::from_secs(86_400 + 43_200)
        );
        assert_eq!(
            parse_duration("P1W").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
    }

    #[test]
    fn bad_durations_are_rejected() {
        for text in [
            "", "P", "PT", "1S", "P1Y", "P1M", "PT1", "PTS", "PT1.2.3S", "P-1D", "PT1X",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn timestamps_have_seven_fraction_digits() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_714_558_830_123_456_789);
        assert_eq!(format_timestamp(t), "2024-05-01T10:20:30.1234567Z");
        assert_eq!(format_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.0000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(format_timestamp(leap), "2000-02-29T00:00:00.0000000Z");
        let before = UNIX_EPOCH - Duration::from_millis(1);
        assert_eq!(format_timestamp(before), "1969-12-31T23:59:59.9990000Z");
    }
}
