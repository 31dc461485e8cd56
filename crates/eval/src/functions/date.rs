//! Date functions: `utcNow` (from the deployment's pinned clock), `dateTimeAdd`, `dateTimeFromEpoch` and
//! `dateTimeToEpoch`, with .NET (invariant culture) parsing and formatting.

#[path = "dotnet_time.rs"]
mod dotnet_time;

use dotnet_time::{UtcDateTime, format_datetime, parse_datetime, parse_duration};

use super::{Args, FunctionDef};
use crate::error::{EvalError, FnError};
use crate::eval::Evaluator;
use crate::value::Value;

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("utcNow", 0, Some(1), utc_now),
    FunctionDef::eager("dateTimeAdd", 2, Some(3), date_time_add),
    FunctionDef::eager("dateTimeFromEpoch", 1, Some(1), date_time_from_epoch),
    FunctionDef::eager("dateTimeToEpoch", 1, Some(1), date_time_to_epoch),
];

/// `utcNow()` without a format: ISO 8601 basic, as documented.
const UTC_NOW_DEFAULT_FORMAT: &str = "yyyyMMddTHHmmssZ";

/// The output of `dateTimeAdd` without a format. The docs say "the format of the base value", but the engine
/// returns a .NET `DateTime` that Json.NET serializes as ISO 8601 with trimmed fractional seconds: Bicep issues
/// #8188/#12853 show `2032-08-29T00:00:00Z`-shaped results, and the docs table's `4/7/2023 2:53:14 PM` is
/// PowerShell re-parsing such an ISO string (it would not re-parse the `u` shape of the base value).
const DATE_TIME_ADD_DEFAULT_FORMAT: &str = "yyyy-MM-ddTHH:mm:ss.FFFFFFFK";

/// `dateTimeFromEpoch` output.
const EPOCH_OUTPUT_FORMAT: &str = "yyyy-MM-ddTHH:mm:ssZ";

fn format_with(value: UtcDateTime, format: &str) -> Result<Value, FnError> {
    format_datetime(value, format)
        .map(Value::String)
        .map_err(|_| {
            FnError::msg(format!(
                "the format '{format}' is not a valid .NET date and time format string."
            ))
        })
}

fn parse_base(text: &str) -> Result<UtcDateTime, FnError> {
    parse_datetime(text).ok_or_else(|| {
        FnError::msg(format!(
            "the value '{text}' is not a valid date and time. Use an ISO 8601 timestamp such as '2020-04-07T14:53:14Z'."
        ))
    })
}

fn utc_now(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    if !ev.env().allows_nondeterministic() {
        return Err(FnError::from(EvalError::expression(
            "The template function 'utcNow' is not expected at this location. The function can only be used with \
             parameter default values. Please see https://aka.ms/arm-template/#parameters for usage details.",
        )));
    }
    let format = match args.get(0) {
        Some(_) => args.string(0)?,
        None => UTC_NOW_DEFAULT_FORMAT,
    };
    let clock = &ev.env().facts().utc_now;
    if clock.is_empty() {
        return Err(FnError::msg(
            "the deployment has no pinned clock (utc_now), so the current time is not known.",
        ));
    }
    let now = parse_datetime(clock).ok_or_else(|| {
        FnError::msg(format!(
            "the deployment clock '{clock}' is not an RFC 3339 timestamp."
        ))
    })?;
    format_with(now, format)
}

fn date_time_add(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let base = parse_base(args.string(0)?)?;
    let duration_text = args.string(1)?;
    let duration = parse_duration(duration_text).ok_or_else(|| {
        FnError::msg(format!(
            "the duration '{duration_text}' is not a valid ISO 8601 duration such as 'P1D', 'PT1H' or '-P1Y2M'."
        ))
    })?;
    let format = match args.get(2) {
        Some(_) => args.string(2)?,
        None => DATE_TIME_ADD_DEFAULT_FORMAT,
    };
    let result = base.add_ticks(duration).ok_or_else(|| {
        FnError::msg("the added or subtracted value results in a date outside the years 1 to 9999.")
    })?;
    format_with(result, format)
}

fn date_time_from_epoch(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let seconds = args.int(0)?;
    let value = UtcDateTime::from_unix_seconds(seconds).ok_or_else(|| {
        FnError::msg(format!(
            "the epoch time {seconds} is outside the supported range of -62135596800 to 253402300799 seconds."
        ))
    })?;
    format_with(value, EPOCH_OUTPUT_FORMAT)
}

fn date_time_to_epoch(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let value = parse_base(args.string(0)?)?;
    Ok(Value::Int(value.unix_seconds()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::env::{DeploymentFacts, Environment, RuntimeCall, SimpleEnvironment, UserFunction};
    use crate::error::EvalError;
    use crate::functions::test_util::{check, check_err, eval_in};
    use crate::value::Value;

    fn env_at(clock: &str) -> SimpleEnvironment {
        SimpleEnvironment {
            facts: DeploymentFacts {
                utc_now: clock.to_string(),
                ..DeploymentFacts::default()
            },
            ..SimpleEnvironment::default()
        }
    }

    #[track_caller]
    fn check_at(clock: &str, expr: &str, expected: serde_json::Value) {
        match eval_in(&env_at(clock), expr) {
            Ok(v) => assert_eq!(
                v,
                Value::from(expected.clone()),
                "{expr} gave {:?}",
                v.to_json()
            ),
            Err(e) => panic!("{expr} failed: {e}"),
        }
    }

    /// An environment outside parameter default values.
    struct NoDefaults(SimpleEnvironment);

    impl Environment for NoDefaults {
        fn parameter(&self, name: &str) -> Result<Value, EvalError> {
            self.0.parameter(name)
        }
        fn variable(&self, name: &str) -> Result<Value, EvalError> {
            self.0.variable(name)
        }
        fn user_function(&self, ns: &str, name: &str) -> Option<std::rc::Rc<UserFunction>> {
            self.0.user_function(ns, name)
        }
        fn budget(&self) -> &crate::Budget {
            self.0.budget()
        }
        fn facts(&self) -> &DeploymentFacts {
            self.0.facts()
        }
        fn runtime(&self, call: RuntimeCall<'_>) -> Result<Value, EvalError> {
            self.0.runtime(call)
        }
        fn allows_nondeterministic(&self) -> bool {
            false
        }
        fn new_guid(&self) -> String {
            self.0.new_guid()
        }
    }

    const DOCS_CLOCK: &str = "2019-03-05T17:53:18Z";

    #[test]
    fn utc_now_docs_examples() {
        // functions/date-utcnow.json (clock pinned by the case's context).
        check_at(DOCS_CLOCK, "utcNow()", json!("20190305T175318Z"));
        check_at(DOCS_CLOCK, "utcNow('d')", json!("03/05/2019"));
        check_at(DOCS_CLOCK, "utcNow('M d')", json!("3 5"));
    }

    #[test]
    fn utc_now_formats() {
        check_at(DOCS_CLOCK, "utcNow('u')", json!("2019-03-05 17:53:18Z"));
        check_at(DOCS_CLOCK, "utcNow('yyyy-MM-dd')", json!("2019-03-05"));
        check_at(
            "2019-03-05T17:53:18.25Z",
            "utcNow('o')",
            json!("2019-03-05T17:53:18.2500000Z"),
        );
        check_at("2019-03-05T19:53:18+02:00", "utcNow('HH')", json!("17"));
        check_at(
            DOCS_CLOCK,
            "utcNow('F')",
            json!("Tuesday, 05 March 2019 17:53:18"),
        );
    }

    #[test]
    fn utc_now_errors() {
        check_err("utcNow()", "no pinned clock");
        let env = NoDefaults(env_at(DOCS_CLOCK));
        let err = crate::eval::Evaluator::new(&env)
            .eval_string("[utcNow()]")
            .expect_err("utcNow outside a default value");
        assert!(
            err.to_string()
                .contains("can only be used with parameter default values"),
            "{err}"
        );
        assert!(eval_in(&env_at("yesterday"), "utcNow()").is_err());
        assert!(eval_in(&env_at(DOCS_CLOCK), "utcNow('Q')").is_err());
        assert!(eval_in(&env_at(DOCS_CLOCK), "utcNow(1)").is_err());
    }

    #[test]
    fn date_time_add_docs_example() {
        // functions/date-datetimeadd.json: the docs table shows PowerShell's rendering of the same instants
        // (4/7/2023 2:53:14 PM, 3/29/2020 2:53:14 PM, 4/7/2020 3:53:14 PM).
        check(
            "dateTimeAdd('2020-04-07 14:53:14Z', 'P3Y')",
            json!("2023-04-07T14:53:14Z"),
        );
        check(
            "dateTimeAdd('2020-04-07 14:53:14Z', '-P9D')",
            json!("2020-03-29T14:53:14Z"),
        );
        check(
            "dateTimeAdd('2020-04-07 14:53:14Z', 'PT1H')",
            json!("2020-04-07T15:53:14Z"),
        );
        check(
            "dateTimeAdd('2020-04-07 14:53:14Z', 'P3Y', 'M/d/yyyy h:mm:ss tt')",
            json!("4/7/2023 2:53:14 PM"),
        );
        check(
            "dateTimeAdd('2020-04-07 14:53:14Z', '-P9D', 'M/d/yyyy h:mm:ss tt')",
            json!("3/29/2020 2:53:14 PM"),
        );
        check(
            "dateTimeAdd('2020-04-07 14:53:14Z', 'PT1H', 'M/d/yyyy h:mm:ss tt')",
            json!("4/7/2020 3:53:14 PM"),
        );
    }

    #[test]
    fn date_time_add_uses_fixed_length_years_and_months() {
        // Real ARM: P1Y = 365 days, P1M = 30 days (Azure/bicep#8188, #12853).
        check(
            "dateTimeAdd('2022-09-01T00:00:00Z', 'P10Y')",
            json!("2032-08-29T00:00:00Z"),
        );
        check(
            "dateTimeAdd('2024-01-01', 'P1Y')",
            json!("2024-12-31T00:00:00Z"),
        );
        check(
            "dateTimeAdd('2023-01-01', 'P1Y')",
            json!("2024-01-01T00:00:00Z"),
        );
        check(
            "dateTimeAdd('2024-01-31T00:00:00Z', 'P1M')",
            json!("2024-03-01T00:00:00Z"),
        );
    }

    #[test]
    fn date_time_add_shapes_and_formats() {
        check(
            "dateTimeAdd('20190305T175318Z', 'PT10H', 'yyyyMMdd_hhmmss')",
            json!("20190306_035318"),
        );
        check(
            "dateTimeAdd('2020-04-07T14:53:14.5Z', 'PT0.25S')",
            json!("2020-04-07T14:53:14.75Z"),
        );
        check(
            "dateTimeAdd('2020-04-07T16:53:14+02:00', 'P1D', 'u')",
            json!("2020-04-08 14:53:14Z"),
        );
        check(
            "dateTimeAdd('2020-04-07T14:53:14Z', 'P1DT2H3M4S', 's')",
            json!("2020-04-08T16:56:18"),
        );
    }

    #[test]
    fn date_time_add_errors() {
        check_err(
            "dateTimeAdd('not a date', 'P1D')",
            "not a valid date and time",
        );
        check_err(
            "dateTimeAdd('2020-04-07', 'P1W')",
            "not a valid ISO 8601 duration",
        );
        check_err(
            "dateTimeAdd('2020-04-07', '1 day')",
            "not a valid ISO 8601 duration",
        );
        check_err(
            "dateTimeAdd('9999-12-31', 'P1D')",
            "outside the years 1 to 9999",
        );
        check_err(
            "dateTimeAdd('0001-01-01', '-PT1S')",
            "outside the years 1 to 9999",
        );
        check_err(
            "dateTimeAdd('2020-04-07', 'P1D', 'Q')",
            "not a valid .NET date",
        );
        check_err("dateTimeAdd(1, 'P1D')", "must be of type 'String'");
        check_err("dateTimeAdd('2020-04-07')", "dateTimeAdd");
    }

    #[test]
    fn epoch_docs_example() {
        // functions/date-epoch-inline.json.
        check(
            "dateTimeFromEpoch(1683040573)",
            json!("2023-05-02T15:16:13Z"),
        );
        check("dateTimeToEpoch('2023-05-02T15:16:13Z')", json!(1683040573));
        check(
            "dateTimeToEpoch(dateTimeAdd('2022-05-02T15:16:13Z', 'P1Y'))",
            json!(1683040573),
        );
    }

    #[test]
    fn epoch_conversions() {
        check("dateTimeFromEpoch(0)", json!("1970-01-01T00:00:00Z"));
        check("dateTimeFromEpoch(-1)", json!("1969-12-31T23:59:59Z"));
        check(
            "dateTimeFromEpoch(253402300799)",
            json!("9999-12-31T23:59:59Z"),
        );
        check("dateTimeToEpoch('1970-01-01T00:00:00.9Z')", json!(0));
        check("dateTimeToEpoch('1969-12-31T23:59:59.5Z')", json!(-1));
        check("dateTimeToEpoch('20190305T175318Z')", json!(1551808398));
        check(
            "dateTimeToEpoch('2023-05-02T17:16:13+02:00')",
            json!(1683040573),
        );
    }

    #[test]
    fn epoch_errors() {
        check_err(
            "dateTimeFromEpoch(253402300800)",
            "outside the supported range",
        );
        check_err(
            "dateTimeFromEpoch(-62135596801)",
            "outside the supported range",
        );
        check_err(
            "dateTimeFromEpoch('1683040573')",
            "must be of type 'Integer'",
        );
        check_err("dateTimeToEpoch('yesterday')", "not a valid date and time");
        check_err("dateTimeToEpoch(5)", "must be of type 'String'");
    }
}
