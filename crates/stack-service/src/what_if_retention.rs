//! How long a stack what-if (or drift detection) result is kept: its `retentionInterval`, an ISO 8601 duration of
//! weeks, days, hours, minutes and seconds (`P7D`, `PT12H`, `P1W`, ...), parsed to the millisecond; anything else is
//! 400 `InvalidRetentionInterval` at the field.

use std::time::Duration;

use cairn_arm::ArmError;
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;

/// Why a `retentionInterval` is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntervalError {
    /// Not an ISO 8601 duration of the accepted form.
    Syntax,
    /// Years or months: they have no fixed length.
    CalendarUnit,
    /// Zero (or less than a millisecond): nothing could be retained.
    Zero,
    /// Longer than a timestamp can hold.
    TooLong,
}

impl IntervalError {
    fn message(self, text: &str) -> String {
        // Echo a bounded prefix only: the text is the client's own, but need not be short.
        let shown: String = text.chars().take(40).collect();
        let reason = match self {
            IntervalError::Syntax => "is not an ISO 8601 duration",
            IntervalError::CalendarUnit => {
                "uses years or months, which have no fixed length; use weeks, days, hours, minutes or seconds"
            }
            IntervalError::Zero => "must be longer than zero",
            IntervalError::TooLong => "is too long",
        };
        format!(
            "The retentionInterval '{shown}' {reason} (expected a duration such as 'P7D', 'PT12H', 'P1W' or \
             'P1DT6H30M')."
        )
    }
}

/// One designator of a duration: its letter and length in milliseconds (`None`: a calendar unit).
type Unit = (char, Option<u128>);

const DATE_UNITS: &[Unit] = &[
    ('Y', None),
    ('M', None),
    ('W', Some(7 * 86_400_000)),
    ('D', Some(86_400_000)),
];
const TIME_UNITS: &[Unit] = &[
    ('H', Some(3_600_000)),
    ('M', Some(60_000)),
    ('S', Some(1_000)),
];

/// Parses an ISO 8601 duration of weeks, days, hours, minutes and seconds: `P[nW][nD][T[nH][nM][nS]]`, at least
/// one component, designators in that order, a decimal fraction (`.` or `,`) on the last component only, letters
/// in either case. Years and months are refused (no fixed length), as are zero and signs. Precision is the
/// millisecond.
pub(crate) fn parse_retention_interval(text: &str) -> Result<Duration, IntervalError> {
    let upper = text.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix('P').ok_or(IntervalError::Syntax)?;
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) if !time.is_empty() => (date, Some(time)),
        Some(_) => return Err(IntervalError::Syntax),
        None => (rest, None),
    };
    let mut components = components_of(date, DATE_UNITS)?;
    if let Some(time) = time {
        components.extend(components_of(time, TIME_UNITS)?);
    }
    if components.is_empty() {
        return Err(IntervalError::Syntax);
    }
    let last = components.len() - 1;
    let mut total: u128 = 0;
    for (index, (number, unit)) in components.into_iter().enumerate() {
        let (whole, fraction) = match number.split_once(['.', ',']) {
            Some((whole, fraction)) if index == last && !fraction.is_empty() => (whole, fraction),
            Some(_) => return Err(IntervalError::Syntax),
            None => (number, ""),
        };
        let Some(unit_millis) = unit.1 else {
            return Err(IntervalError::CalendarUnit);
        };
        let whole: u128 = if whole.is_empty() {
            return Err(IntervalError::Syntax);
        } else if whole.len() > 30 {
            return Err(IntervalError::TooLong);
        } else {
            whole.parse().map_err(|_| IntervalError::Syntax)?
        };
        // Digits past the ninth are below a millisecond of any unit that fits in a timestamp.
        let kept = &fraction[..fraction.len().min(9)];
        let fraction_millis = if kept.is_empty() {
            0
        } else {
            let digits: u128 = kept.parse().map_err(|_| IntervalError::Syntax)?;
            digits * unit_millis / 10u128.pow(u32::try_from(kept.len()).unwrap_or(9))
        };
        total = whole
            .checked_mul(unit_millis)
            .and_then(|millis| millis.checked_add(fraction_millis))
            .and_then(|millis| millis.checked_add(total))
            .ok_or(IntervalError::TooLong)?;
    }
    if total == 0 {
        return Err(IntervalError::Zero);
    }
    let millis = u64::try_from(total)
        .ok()
        .filter(|millis| i64::try_from(*millis).is_ok())
        .ok_or(IntervalError::TooLong)?;
    Ok(Duration::from_millis(millis))
}

/// The `(number, unit)` components of one part of a duration, checking designator order.
fn components_of<'a>(
    part: &'a str,
    units: &'static [Unit],
) -> Result<Vec<(&'a str, Unit)>, IntervalError> {
    let mut components = Vec::new();
    let mut next_unit = 0;
    let mut rest = part;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .ok_or(IntervalError::Syntax)?;
        let (number, tail) = rest.split_at(end);
        let mut chars = tail.chars();
        let designator = chars.next().ok_or(IntervalError::Syntax)?;
        let position = units[next_unit..]
            .iter()
            .position(|(letter, _)| *letter == designator)
            .ok_or(IntervalError::Syntax)?;
        if number.is_empty() {
            return Err(IntervalError::Syntax);
        }
        components.push((number, units[next_unit + position]));
        next_unit += position + 1;
        rest = chars.as_str();
    }
    Ok(components)
}

/// The request's `retentionInterval` as a duration; 400 `InvalidRetentionInterval` when missing or malformed.
pub(crate) fn retention_interval(
    request: &DeploymentStacksWhatIfResult,
) -> Result<Duration, ArmError> {
    retention_interval_at(
        &request.properties.retention_interval,
        "properties.retentionInterval",
    )
}

/// The retention interval `text` given at `target` (a what-if result's, or a drift detection's); 400
/// `InvalidRetentionInterval` when it is empty or malformed.
pub(crate) fn retention_interval_at(text: &str, target: &str) -> Result<Duration, ArmError> {
    let invalid = |message: String| {
        ArmError::new(400, "InvalidRetentionInterval", message).with_target(target)
    };
    if text.trim().is_empty() {
        return Err(invalid(
            "'retentionInterval' is required (ISO 8601, e.g. 'P7D').".into(),
        ));
    }
    parse_retention_interval(text).map_err(|error| invalid(error.message(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_intervals_parse() {
        let secs = |s: u64| Ok(Duration::from_secs(s));
        let cases: &[(&str, Result<Duration, IntervalError>)] = &[
            ("P7D", secs(7 * 86_400)),
            ("P1W", secs(7 * 86_400)),
            ("p2w3d", secs(17 * 86_400)),
            ("PT12H", secs(12 * 3_600)),
            ("PT1M", secs(60)),
            ("P1M", Err(IntervalError::CalendarUnit)),
            ("P1Y", Err(IntervalError::CalendarUnit)),
            ("P1DT6H30M", secs(86_400 + 6 * 3_600 + 30 * 60)),
            ("PT1S", secs(1)),
            ("PT1.5S", Ok(Duration::from_millis(1_500))),
            ("PT0,25S", Ok(Duration::from_millis(250))),
            ("P0.5D", secs(43_200)),
            (" P30D ", secs(30 * 86_400)),
            ("PT90M", secs(90 * 60)),
            ("PT0S", Err(IntervalError::Zero)),
            ("P0D", Err(IntervalError::Zero)),
            ("PT0.0001S", Err(IntervalError::Zero)),
            ("", Err(IntervalError::Syntax)),
            ("P", Err(IntervalError::Syntax)),
            ("PT", Err(IntervalError::Syntax)),
            ("P1DT", Err(IntervalError::Syntax)),
            ("7D", Err(IntervalError::Syntax)),
            ("seven days", Err(IntervalError::Syntax)),
            ("P-1D", Err(IntervalError::Syntax)),
            ("-P1D", Err(IntervalError::Syntax)),
            ("PD", Err(IntervalError::Syntax)),
            ("P1D2W", Err(IntervalError::Syntax)),
            ("P1D1D", Err(IntervalError::Syntax)),
            ("PT1S1M", Err(IntervalError::Syntax)),
            ("P1H", Err(IntervalError::Syntax)),
            ("PT1D", Err(IntervalError::Syntax)),
            ("P1.5DT1H", Err(IntervalError::Syntax)),
            ("PT.5S", Err(IntervalError::Syntax)),
            ("PT5.S", Err(IntervalError::Syntax)),
            ("P1", Err(IntervalError::Syntax)),
            ("P1DX", Err(IntervalError::Syntax)),
            ("P1D T1H", Err(IntervalError::Syntax)),
            ("P١D", Err(IntervalError::Syntax)),
            (
                "P99999999999999999999999999999999D",
                Err(IntervalError::TooLong),
            ),
            ("P999999999999D", Err(IntervalError::TooLong)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_retention_interval(text), *expected, "{text:?}");
        }
    }

    /// Every duration written in canonical `PnDTnHnMnS` form (and as weeks when whole) parses back to itself.
    #[test]
    fn retention_intervals_round_trip() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2_000 {
            // xorshift: deterministic spread over days, hours, minutes, seconds and milliseconds.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let millis = seed % (400 * 86_400_000) + 1;
            let (days, rest) = (millis / 86_400_000, millis % 86_400_000);
            let (hours, rest) = (rest / 3_600_000, rest % 3_600_000);
            let (minutes, rest) = (rest / 60_000, rest % 60_000);
            let (seconds, fraction) = (rest / 1_000, rest % 1_000);
            let text = format!("P{days}DT{hours}H{minutes}M{seconds}.{fraction:03}S");
            assert_eq!(
                parse_retention_interval(&text),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
            if days > 0 && days % 7 == 0 {
                assert_eq!(
                    parse_retention_interval(&format!("P{}W", days / 7)),
                    Ok(Duration::from_millis(days * 86_400_000))
                );
            }
        }
    }

    #[test]
    fn bad_retention_intervals_are_400_at_the_field() {
        for text in ["", "seven days", "P1M", "PT0S"] {
            let request: DeploymentStacksWhatIfResult =
                serde_json::from_value(serde_json::json!({"properties": {
                    "deploymentStackResourceId": "x", "retentionInterval": text,
                    "actionOnUnmanage": {"resources": "detach"}, "denySettings": {"mode": "none"}
                }}))
                .expect("request");
            let error = retention_interval(&request).expect_err(text);
            assert_eq!(
                (error.status(), error.code()),
                (400, "InvalidRetentionInterval")
            );
            assert_eq!(
                error.detail().target.as_deref(),
                Some("properties.retentionInterval")
            );
        }
    }
}
