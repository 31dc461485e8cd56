//! The `api-version` values cairn accepts per API, and the check that turns a missing or unknown one into
//! ARM's `MissingApiVersionParameter` / `InvalidApiVersionParameter` errors.
//!
//! Resource groups and deployments are served by ARM itself (`Microsoft.Resources`), which accepts one
//! shared list of versions; cairn accepts the list ARM reported in 2025 (newest first, in ARM's own order,
//! back to the 2013/2014 entries that ARM still lists), so every Azure SDK (Python, JS, .NET, Go, Java) and
//! every `az` release is accepted. Deployments additionally accept the stable 2026 versions of the
//! deployments spec. Deployment stacks accept the three versions they ever shipped (the 2021 preview was
//! retired); stack what-if results exist only in 2025-07-01.

use crate::error::ArmError;

/// Which API a request is for; each has its own accepted versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApiKind {
    /// `Microsoft.Resources` resource groups (and the other plain ARM routes: subscriptions, operation results).
    ResourceGroups,
    /// `Microsoft.Resources/deployments`, its operations and `calculateTemplateHash`.
    Deployments,
    /// `Microsoft.Resources/deploymentStacks`.
    DeploymentStacks,
    /// `Microsoft.Resources/deploymentStacksWhatIfResults`.
    DeploymentStacksWhatIf,
}

/// `Microsoft.Resources` versions in the order ARM lists them in its `InvalidApiVersionParameter` message.
const MICROSOFT_RESOURCES: &[&str] = &[
    "2025-04-01",
    "2025-03-01",
    "2024-10-01-preview",
    "2024-11-01",
    "2024-08-01",
    "2024-07-01",
    "2024-06-01-preview",
    "2024-03-01",
    "2023-07-01",
    "2023-07-01-preview",
    "2023-03-01-preview",
    "2022-12-01",
    "2022-11-01-preview",
    "2022-09-01",
    "2022-06-01",
    "2022-05-01",
    "2022-03-01-preview",
    "2022-01-01",
    "2021-04-01",
    "2021-01-01",
    "2020-10-01",
    "2020-09-01",
    "2020-08-01",
    "2020-07-01",
    "2020-06-01",
    "2020-05-01",
    "2020-01-01",
    "2019-11-01",
    "2019-10-01",
    "2019-09-01",
    "2019-08-01",
    "2019-07-01",
    "2019-06-01",
    "2019-05-10",
    "2019-05-01",
    "2019-03-01",
    "2018-11-01",
    "2018-09-01",
    "2018-08-01",
    "2018-07-01",
    "2018-06-01",
    "2018-05-01",
    "2018-02-01",
    "2018-01-01",
    "2017-12-01",
    "2017-08-01",
    "2017-06-01",
    "2017-05-10",
    "2017-05-01",
    "2017-03-01",
    "2016-09-01",
    "2016-07-01",
    "2016-06-01",
    "2016-02-01",
    "2015-11-01",
    "2015-01-01",
    "2014-04-01-preview",
    "2014-04-01",
    "2014-01-01",
    "2013-03-01",
    "2014-02-26",
    "2014-04",
];

/// Deployments: the stable 2026 deployments-spec versions, then the shared `Microsoft.Resources` list.
const DEPLOYMENTS: &[&str] = &[
    "2026-09-01",
    "2026-06-01",
    "2025-04-01",
    "2025-03-01",
    "2024-10-01-preview",
    "2024-11-01",
    "2024-08-01",
    "2024-07-01",
    "2024-06-01-preview",
    "2024-03-01",
    "2023-07-01",
    "2023-07-01-preview",
    "2023-03-01-preview",
    "2022-12-01",
    "2022-11-01-preview",
    "2022-09-01",
    "2022-06-01",
    "2022-05-01",
    "2022-03-01-preview",
    "2022-01-01",
    "2021-04-01",
    "2021-01-01",
    "2020-10-01",
    "2020-09-01",
    "2020-08-01",
    "2020-07-01",
    "2020-06-01",
    "2020-05-01",
    "2020-01-01",
    "2019-11-01",
    "2019-10-01",
    "2019-09-01",
    "2019-08-01",
    "2019-07-01",
    "2019-06-01",
    "2019-05-10",
    "2019-05-01",
    "2019-03-01",
    "2018-11-01",
    "2018-09-01",
    "2018-08-01",
    "2018-07-01",
    "2018-06-01",
    "2018-05-01",
    "2018-02-01",
    "2018-01-01",
    "2017-12-01",
    "2017-08-01",
    "2017-06-01",
    "2017-05-10",
    "2017-05-01",
    "2017-03-01",
    "2016-09-01",
    "2016-07-01",
    "2016-06-01",
    "2016-02-01",
    "2015-11-01",
    "2015-01-01",
    "2014-04-01-preview",
    "2014-04-01",
    "2014-01-01",
    "2013-03-01",
    "2014-02-26",
    "2014-04",
];

const DEPLOYMENT_STACKS: &[&str] = &["2025-07-01", "2024-03-01", "2022-08-01-preview"];

const DEPLOYMENT_STACKS_WHAT_IF: &[&str] = &["2025-07-01"];

impl ApiKind {
    /// The accepted versions, in the order the error message lists them (newest first).
    pub fn supported_versions(self) -> &'static [&'static str] {
        match self {
            ApiKind::ResourceGroups => MICROSOFT_RESOURCES,
            ApiKind::Deployments => DEPLOYMENTS,
            ApiKind::DeploymentStacks => DEPLOYMENT_STACKS,
            ApiKind::DeploymentStacksWhatIf => DEPLOYMENT_STACKS_WHAT_IF,
        }
    }

    /// The newest version, which cairn's own clients should send.
    pub fn latest(self) -> &'static str {
        match self {
            ApiKind::ResourceGroups => "2025-04-01",
            ApiKind::Deployments => "2025-04-01",
            ApiKind::DeploymentStacks | ApiKind::DeploymentStacksWhatIf => "2025-07-01",
        }
    }

    /// Whether `version` is accepted (ignoring ASCII case, so `-Preview` matches `-preview`).
    pub fn supports(self, version: &str) -> bool {
        self.supported_versions()
            .iter()
            .any(|v| v.eq_ignore_ascii_case(version))
    }
}

/// Checks the `api-version` query value of a request for `kind`. An absent or blank value is
/// `MissingApiVersionParameter`; an unknown one is `InvalidApiVersionParameter` listing the accepted ones.
pub fn check(kind: ApiKind, version: Option<&str>) -> Result<(), ArmError> {
    let version = version.map(str::trim).filter(|v| !v.is_empty());
    match version {
        None => Err(ArmError::missing_api_version()),
        Some(v) if kind.supports(v) => Ok(()),
        Some(v) => Err(ArmError::invalid_api_version(v, kind.supported_versions())),
    }
}

/// Whether `version` is `minimum` or newer, comparing the `YYYY-MM-DD` dates (a preview counts as its date).
/// Used to gate fields added in later versions, e.g. `is_at_least(v, "2025-07-01")` for stack extensibility.
/// Versions that do not start with a date compare as older than any dated version.
pub fn is_at_least(version: &str, minimum: &str) -> bool {
    fn date(v: &str) -> Option<&str> {
        let d = v.get(..10)?;
        let b = d.as_bytes();
        let shape_ok = b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
        shape_ok.then_some(d)
    }
    match (date(version), date(minimum)) {
        (Some(v), Some(m)) => v >= m,
        (None, Some(_)) => false,
        (_, None) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;

    #[test]
    fn sdk_versions_are_accepted() {
        // Versions current SDKs and az send: Python azure-mgmt-resource(-deployments), JS, .NET, Go, az.
        for v in [
            "2025-04-01",
            "2024-11-01",
            "2024-03-01",
            "2022-09-01",
            "2021-04-01",
            "2019-10-01",
            "2016-09-01",
        ] {
            assert!(check(ApiKind::Deployments, Some(v)).is_ok(), "{v}");
            assert!(check(ApiKind::ResourceGroups, Some(v)).is_ok(), "{v}");
        }
        for v in [
            "2025-07-01",
            "2024-03-01",
            "2022-08-01-preview",
            "2022-08-01-PREVIEW",
        ] {
            assert!(check(ApiKind::DeploymentStacks, Some(v)).is_ok(), "{v}");
        }
        assert!(check(ApiKind::Deployments, Some("2026-06-01")).is_ok());
        assert!(check(ApiKind::ResourceGroups, Some("2026-06-01")).is_err());
        assert!(check(ApiKind::DeploymentStacksWhatIf, Some("2024-03-01")).is_err());
    }

    #[test]
    fn missing_or_blank_is_missing() {
        for v in [None, Some(""), Some("  ")] {
            let e = check(ApiKind::Deployments, v).unwrap_err();
            assert_eq!(
                (e.status(), e.code()),
                (400, codes::MISSING_API_VERSION_PARAMETER)
            );
        }
    }

    #[test]
    fn unknown_versions_list_the_supported_ones() {
        let e = check(ApiKind::DeploymentStacks, Some("2023-01-01")).unwrap_err();
        assert_eq!(e.code(), codes::INVALID_API_VERSION_PARAMETER);
        assert_eq!(
            e.detail().message(),
            "The api-version '2023-01-01' is invalid. The supported versions are '2025-07-01,2024-03-01,2022-08-01-preview'."
        );
    }

    #[test]
    fn lists_have_no_duplicates_and_latest_is_listed() {
        for kind in [
            ApiKind::ResourceGroups,
            ApiKind::Deployments,
            ApiKind::DeploymentStacks,
            ApiKind::DeploymentStacksWhatIf,
        ] {
            let versions = kind.supported_versions();
            let unique: std::collections::HashSet<_> = versions.iter().collect();
            assert_eq!(unique.len(), versions.len(), "{kind:?}");
            assert!(kind.supports(kind.latest()), "{kind:?}");
        }
        // Deployments accept everything resource groups accept.
        assert!(
            MICROSOFT_RESOURCES
                .iter()
                .all(|v| ApiKind::Deployments.supports(v))
        );
    }

    #[test]
    fn version_ordering_uses_the_date() {
        assert!(is_at_least("2025-07-01", "2025-07-01"));
        assert!(is_at_least("2026-06-01", "2025-07-01"));
        assert!(!is_at_least("2024-03-01", "2025-07-01"));
        assert!(is_at_least("2022-08-01-preview", "2022-08-01"));
        assert!(!is_at_least("2014-04", "2014-01-01"));
        assert!(!is_at_least("", "2014-01-01"));
    }
}
