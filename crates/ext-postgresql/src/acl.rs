//! Privileges shared by `PostgreSql/grants` and `PostgreSql/defaultPrivileges`: the privilege names each
//! kind of object takes, reading a role's privileges out of an ACL, and the GRANT/REVOKE statements that
//! turn what a role holds into exactly the declared set.

use std::collections::BTreeMap;

use cairn_extension_sdk::{ExtensionError, Validator, codes};
use sqlx::PgConnection;

use crate::error::sql_error;
use crate::sql::{check_name, execute, ident};

/// The kinds of object privileges are granted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A database.
    Database,
    /// A schema.
    Schema,
    /// Tables, views, materialized views, foreign and partitioned tables.
    Table,
    /// Sequences.
    Sequence,
    /// Functions and procedures.
    Function,
    /// Types and domains (default privileges only).
    Type,
}

impl ObjectKind {
    /// The kind named by an `objectType` property value.
    pub fn parse(text: &str) -> Option<ObjectKind> {
        match text {
            "database" => Some(ObjectKind::Database),
            "schema" => Some(ObjectKind::Schema),
            "table" => Some(ObjectKind::Table),
            "sequence" => Some(ObjectKind::Sequence),
            "function" => Some(ObjectKind::Function),
            "type" => Some(ObjectKind::Type),
            _ => None,
        }
    }

    /// The privileges this kind takes, in PostgreSQL's documentation order (the order read back).
    pub fn privileges(self) -> &'static [&'static str] {
        match self {
            ObjectKind::Database => &["CREATE", "CONNECT", "TEMPORARY"],
            ObjectKind::Schema => &["USAGE", "CREATE"],
            ObjectKind::Table => &[
                "SELECT",
                "INSERT",
                "UPDATE",
                "DELETE",
                "TRUNCATE",
                "REFERENCES",
                "TRIGGER",
            ],
            ObjectKind::Sequence => &["USAGE", "SELECT", "UPDATE"],
            ObjectKind::Function => &["EXECUTE"],
            ObjectKind::Type => &["USAGE"],
        }
    }

    /// The object keyword in `GRANT ... ON <keyword> name`.
    pub fn keyword(self) -> &'static str {
        match self {
            ObjectKind::Database => "DATABASE",
            ObjectKind::Schema => "SCHEMA",
            ObjectKind::Table => "TABLE",
            ObjectKind::Sequence => "SEQUENCE",
            ObjectKind::Function => "ROUTINE",
            ObjectKind::Type => "TYPE",
        }
    }

    /// The plural in `ALTER DEFAULT PRIVILEGES ... ON <plural>`.
    pub fn plural(self) -> &'static str {
        match self {
            ObjectKind::Database => "DATABASES",
            ObjectKind::Schema => "SCHEMAS",
            ObjectKind::Table => "TABLES",
            ObjectKind::Sequence => "SEQUENCES",
            ObjectKind::Function => "FUNCTIONS",
            ObjectKind::Type => "TYPES",
        }
    }

    /// The one-letter code of `acldefault()` for this kind.
    pub fn acldefault_code(self) -> &'static str {
        match self {
            ObjectKind::Database => "d",
            ObjectKind::Schema => "n",
            ObjectKind::Table => "r",
            ObjectKind::Sequence => "s",
            ObjectKind::Function => "f",
            ObjectKind::Type => "T",
        }
    }
}

/// PostgreSQL's `privilege_type` (from `aclexplode`) as this extension spells it.
fn canonical(privilege_type: &str) -> &str {
    match privilege_type {
        "TEMP" => "TEMPORARY",
        other => other,
    }
}

/// Validates and normalises declared privileges: case-insensitive, `ALL`/`ALL PRIVILEGES` expand to every
/// privilege of the kind, `TEMP` means `TEMPORARY`; returned in the kind's order without duplicates.
pub fn normalise(
    kind: ObjectKind,
    declared: &[String],
    target: &str,
    validator: &mut Validator,
) -> Vec<&'static str> {
    let mut wanted = Vec::new();
    for (index, privilege) in declared.iter().enumerate() {
        let upper = privilege.trim().to_ascii_uppercase();
        if upper == "ALL" || upper == "ALL PRIVILEGES" {
            wanted.extend_from_slice(kind.privileges());
            continue;
        }
        match kind
            .privileges()
            .iter()
            .find(|known| **known == canonical(&upper))
        {
            Some(known) => wanted.push(*known),
            None => validator.error(
                codes::INVALID_PROPERTIES,
                format!("{target}/{index}"),
                format!(
                    "'{}' is not a privilege on a {} (known: {}, ALL).",
                    privilege.replace(['\n', '\r'], " "),
                    kind.keyword().to_ascii_lowercase(),
                    kind.privileges().join(", ")
                ),
            ),
        }
    }
    kind.privileges()
        .iter()
        .copied()
        .filter(|known| wanted.contains(known))
        .collect()
}

/// A grantee: a role, or `PUBLIC` (every role).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grantee {
    /// A named role.
    Role(String),
    /// The pseudo-role `PUBLIC`.
    Public,
}

impl Grantee {
    /// `PUBLIC` (any case: PostgreSQL reserves the name) or a role name, checked.
    pub fn parse(name: &str, target: &str) -> Result<Grantee, ExtensionError> {
        if name.eq_ignore_ascii_case("public") {
            return Ok(Grantee::Public);
        }
        check_name(name, target)?;
        Ok(Grantee::Role(name.to_owned()))
    }

    /// The grantee in SQL.
    pub fn sql(&self) -> String {
        match self {
            Grantee::Role(name) => ident(name),
            Grantee::Public => "PUBLIC".to_owned(),
        }
    }

    /// The grantee's OID as `aclexplode` reports it (0 for `PUBLIC`), or `None` when the role does not
    /// exist.
    pub async fn oid(&self, connection: &mut PgConnection) -> Result<Option<i64>, ExtensionError> {
        match self {
            Grantee::Public => Ok(Some(0)),
            Grantee::Role(name) => {
                sqlx::query_scalar("SELECT oid::int8 FROM pg_roles WHERE rolname = $1")
                    .bind(name)
                    .fetch_optional(connection)
                    .await
                    .map_err(|err| sql_error(&err, &format!("look the role {} up", ident(name))))
            }
        }
    }
}

/// What a grantee holds on one object: privilege → whether it is held with grant option.
pub type Held = BTreeMap<String, bool>;

/// The SQL (a scalar subquery yielding `aclitem[]`) is exploded for the grantee's OID `$1`; further bind
/// parameters are the caller's. Privileges of other kinds than `kind` (there are none in a valid ACL)
/// are ignored.
pub async fn held(
    connection: &mut PgConnection,
    acl_sql: &str,
    bind: &[&str],
    grantee_oid: i64,
    kind: ObjectKind,
) -> Result<Held, ExtensionError> {
    let query = format!(
        "SELECT a.privilege_type::text, a.is_grantable FROM aclexplode(({acl_sql})) a \
         WHERE a.grantee::int8 = $1"
    );
    let mut statement =
        sqlx::query_as::<_, (String, bool)>(sqlx::AssertSqlSafe(query)).bind(grantee_oid);
    for value in bind {
        statement = statement.bind(*value);
    }
    let rows = statement
        .fetch_all(connection)
        .await
        .map_err(|err| sql_error(&err, "read the privileges"))?;
    Ok(rows
        .into_iter()
        .filter(|(privilege, _)| kind.privileges().contains(&canonical(privilege)))
        .map(|(privilege, grantable)| (canonical(&privilege).to_owned(), grantable))
        .collect())
}

/// The statements' shared part: `GRANT`/`REVOKE` as in `GRANT {privs} ON {object} TO {grantee}`; for
/// default privileges the `prefix` is `ALTER DEFAULT PRIVILEGES ...`.
pub struct Statements<'a> {
    /// Text before `GRANT`/`REVOKE` (empty, or `ALTER DEFAULT PRIVILEGES FOR ROLE r IN SCHEMA s`).
    pub prefix: &'a str,
    /// What follows `ON` (e.g. `TABLE "s"."t"` or `TABLES`).
    pub object: &'a str,
    /// The grantee in SQL.
    pub grantee: &'a str,
}

impl Statements<'_> {
    /// The statements turning `current` into exactly `desired` (each held with grant option when
    /// `with_grant_option`); none when they already agree.
    pub fn reconcile(
        &self,
        current: &Held,
        desired: &[&str],
        with_grant_option: bool,
    ) -> Vec<String> {
        let revoke: Vec<&str> = current
            .keys()
            .map(String::as_str)
            .filter(|privilege| !desired.contains(privilege))
            .collect();
        let grant: Vec<&str> = desired
            .iter()
            .copied()
            .filter(|privilege| match current.get(*privilege) {
                None => true,
                Some(grantable) => with_grant_option && !grantable,
            })
            .collect();
        let drop_grant_option: Vec<&str> = desired
            .iter()
            .copied()
            .filter(|privilege| !with_grant_option && current.get(*privilege) == Some(&true))
            .collect();
        let mut statements = Vec::new();
        if !revoke.is_empty() {
            statements.push(self.revoke(&revoke, false));
        }
        if !drop_grant_option.is_empty() {
            statements.push(self.revoke(&drop_grant_option, true));
        }
        if !grant.is_empty() {
            statements.push(format!(
                "{}GRANT {} ON {} TO {}{}",
                self.prefix,
                grant.join(", "),
                self.object,
                self.grantee,
                if with_grant_option {
                    " WITH GRANT OPTION"
                } else {
                    ""
                }
            ));
        }
        statements
    }

    fn revoke(&self, privileges: &[&str], grant_option_only: bool) -> String {
        format!(
            "{}REVOKE {}{} ON {} FROM {}",
            self.prefix,
            if grant_option_only {
                "GRANT OPTION FOR "
            } else {
                ""
            },
            privileges.join(", "),
            self.object,
            self.grantee
        )
    }
}

/// Runs `statements` in order, each reported as changing the privileges of `what`.
pub async fn run(
    connection: &mut PgConnection,
    statements: Vec<String>,
    what: &str,
) -> Result<(), ExtensionError> {
    for statement in statements {
        execute(
            &mut *connection,
            statement,
            &format!("change the privileges on {what}"),
        )
        .await?;
    }
    Ok(())
}

/// The privileges held on every one of `objects` (in the kind's order), and whether each of them is held
/// with grant option everywhere.
pub fn common(kind: ObjectKind, objects: &[Held]) -> (Vec<String>, bool) {
    let privileges: Vec<String> = kind
        .privileges()
        .iter()
        .filter(|privilege| {
            !objects.is_empty() && objects.iter().all(|held| held.contains_key(**privilege))
        })
        .map(|privilege| (*privilege).to_owned())
        .collect();
    let with_grant_option = !privileges.is_empty()
        && objects.iter().all(|held| {
            privileges
                .iter()
                .all(|privilege| held.get(privilege) == Some(&true))
        });
    (privileges, with_grant_option)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges_are_normalised_and_unknown_ones_refused() {
        let mut validator = Validator::new();
        let got = normalise(
            ObjectKind::Database,
            &["temp".into(), "Connect".into(), "CONNECT".into()],
            "/properties/privileges",
            &mut validator,
        );
        assert_eq!(got, ["CONNECT", "TEMPORARY"]);
        assert!(validator.is_empty());
        let all = normalise(
            ObjectKind::Table,
            &["all privileges".into()],
            "/p",
            &mut validator,
        );
        assert_eq!(all, ObjectKind::Table.privileges());
        normalise(
            ObjectKind::Function,
            &["EXECUTE".into(), "SELECT; DROP TABLE x".into()],
            "/properties/privileges",
            &mut validator,
        );
        let err = validator.finish().unwrap_err();
        assert_eq!(
            err.error().target.as_deref(),
            Some("/properties/privileges/1")
        );
    }

    #[test]
    fn reconcile_grants_revokes_and_adjusts_grant_options() {
        let statements = Statements {
            prefix: "",
            object: "TABLE \"s\".\"t\"",
            grantee: "\"r\"",
        };
        let held: Held = [("SELECT".to_owned(), true), ("DELETE".to_owned(), false)].into();
        assert_eq!(
            statements.reconcile(&held, &["SELECT", "INSERT"], false),
            [
                "REVOKE DELETE ON TABLE \"s\".\"t\" FROM \"r\"",
                "REVOKE GRANT OPTION FOR SELECT ON TABLE \"s\".\"t\" FROM \"r\"",
                "GRANT INSERT ON TABLE \"s\".\"t\" TO \"r\"",
            ]
        );
        let exact: Held = [("SELECT".to_owned(), false)].into();
        assert!(statements.reconcile(&exact, &["SELECT"], false).is_empty());
        assert_eq!(
            statements.reconcile(&exact, &["SELECT"], true),
            ["GRANT SELECT ON TABLE \"s\".\"t\" TO \"r\" WITH GRANT OPTION"]
        );
    }

    #[test]
    fn common_privileges_are_those_held_everywhere() {
        let a: Held = [("SELECT".to_owned(), true), ("INSERT".to_owned(), true)].into();
        let b: Held = [("SELECT".to_owned(), true)].into();
        assert_eq!(
            common(ObjectKind::Table, &[a.clone(), b]),
            (vec!["SELECT".to_owned()], true)
        );
        assert_eq!(common(ObjectKind::Table, &[]), (vec![], false));
    }
}
