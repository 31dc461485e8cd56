//! Query strings: decoded `name=value` pairs with case-insensitive lookup, plus the ARM query parameters
//! that have a fixed meaning (`api-version`, `$top`, `$filter`).

use percent_encoding::percent_decode_str;

use crate::error::ArmError;

/// A parsed query string. Names are matched ignoring ASCII case, as ARM does; the first occurrence wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses `a=1&b=x%20y` (without the leading `?`); `+` means a space, invalid UTF-8 is replaced.
    pub fn parse(query: &str) -> Self {
        let query = query.strip_prefix('?').unwrap_or(query);
        let pairs = query
            .split('&')
            .filter(|part| !part.is_empty())
            .map(|part| {
                let (name, value) = part.split_once('=').unwrap_or((part, ""));
                (decode_component(name), decode_component(value))
            })
            .collect();
        Self { pairs }
    }

    /// The value of `name`, ignoring case.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// All pairs, decoded, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// `api-version`.
    pub fn api_version(&self) -> Option<&str> {
        self.get("api-version")
    }

    /// `$top` as a non-negative count; a value that is not one is `InvalidQueryParameterValue`.
    pub fn top(&self) -> Result<Option<u32>, ArmError> {
        match self.get("$top") {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                ArmError::invalid_query_parameter_value("$top", v, &["a non-negative integer"])
            }),
        }
    }

    /// A boolean parameter such as `bypassStackOutOfSyncError`; absent is `false`.
    pub fn flag(&self, name: &str) -> Result<bool, ArmError> {
        match self.get(name) {
            None => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") || v.is_empty() => Ok(false),
            Some(v) => Err(ArmError::invalid_query_parameter_value(
                name,
                v,
                &["true", "false"],
            )),
        }
    }

    /// The state of a deployments list filter `$filter=provisioningState eq '{state}'`, if one is given.
    pub fn provisioning_state_filter(&self) -> Result<Option<String>, ArmError> {
        let Some(filter) = self.get("$filter") else {
            return Ok(None);
        };
        let invalid = || {
            ArmError::invalid_query_parameter_value(
                "$filter",
                filter,
                &["provisioningState eq '{state}'"],
            )
        };
        let (property, rest) = filter
            .trim()
            .split_once(char::is_whitespace)
            .ok_or_else(invalid)?;
        let (operator, literal) = rest
            .trim_start()
            .split_once(char::is_whitespace)
            .ok_or_else(invalid)?;
        let literal = literal.trim();
        let state = literal
            .strip_prefix('\'')
            .and_then(|s| s.strip_suffix('\''))
            .filter(|s| !s.contains('\''));
        match state {
            Some(state)
                if property.eq_ignore_ascii_case("provisioningState")
                    && operator.eq_ignore_ascii_case("eq") =>
            {
                Ok(Some(state.to_owned()))
            }
            _ => Err(invalid()),
        }
    }
}

fn decode_component(raw: &str) -> String {
    let spaced = raw.replace('+', " ");
    percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_ignore_case_and_decode() {
        let q = Query::parse(
            "?API-VERSION=2025-04-01&$filter=provisioningState%20eq%20%27Failed%27&x=a+b",
        );
        assert_eq!(q.api_version(), Some("2025-04-01"));
        assert_eq!(q.get("X"), Some("a b"));
        assert_eq!(
            q.provisioning_state_filter().unwrap(),
            Some("Failed".into())
        );
    }

    #[test]
    fn top_and_flags_are_checked() {
        assert_eq!(Query::parse("$top=5").top().unwrap(), Some(5));
        assert!(Query::parse("$top=-1").top().is_err());
        assert!(
            Query::parse("bypassStackOutOfSyncError=TRUE")
                .flag("bypassStackOutOfSyncError")
                .unwrap()
        );
        assert!(!Query::parse("").flag("bypassStackOutOfSyncError").unwrap());
        assert!(Query::parse("b=yes").flag("b").is_err());
    }

    #[test]
    fn filters_other_than_provisioning_state_are_rejected() {
        assert!(
            Query::parse("$filter=name eq 'x'")
                .provisioning_state_filter()
                .is_err()
        );
        assert!(
            Query::parse("$filter=provisioningState eq Failed")
                .provisioning_state_filter()
                .is_err()
        );
        let spaced = Query::parse("$filter=provisioningState%20%20eq%20%20%27Running%27%20");
        assert_eq!(
            spaced.provisioning_state_filter().unwrap(),
            Some("Running".into())
        );
        assert!(
            Query::parse("$filter=provisioningState")
                .provisioning_state_filter()
                .is_err()
        );
        assert_eq!(
            Query::parse("a=1").provisioning_state_filter().unwrap(),
            None
        );
    }
}
