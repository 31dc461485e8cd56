//! Copying a whole store from one backend into another (`cairn store copy`): the tables a copy carries in the
//! schema every SQL backend shares (same tables, columns and forms, by name), their rows as backend-neutral
//! [`Value`]s, and [`ExportRows`], the reading side a source implements.
//!
//! Sealed columns travel opened, as [`Value::Secret`], only in memory: the source opens each with its data key and
//! the target seals it again with its own, bound to the same table, row and column. So the two stores need not
//! share a data key or a master key, and no ciphertext is ever bound to the wrong store.
//!
//! Not copied: `schema_migrations` (each database has its own), `store_keys` (each store keeps its data key),
//! `leases` (who holds a stack operation is a fact about running processes, not data) and `operation_results` (the
//! answers to `Location` polls, kept an hour for the client that is polling the server it came from).

use std::fmt;

use secrecy::{ExposeSecret, SecretString};

use crate::codec::{Columns, Row as CodecRow};
use crate::crypto::DataKey;
use crate::error::{Entity, StoreError, StoreResult};
use crate::sealed::{
    HOST_OPERATION_STATE, SECRET_VALUE, STACK_WHAT_IF_REQUEST, SealedColumn, VAULT_SECRET_VALUE,
};
use crate::store::StoreFuture;

/// What a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Integer,
    Text,
    Boolean,
    /// A value sealed with the store's data key.
    Sealed(&'static SealedColumn),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
}

/// A table a copy carries.
#[derive(Debug, PartialEq, Eq)]
pub struct Table {
    pub name: &'static str,
    /// What its rows are, for reports ("journal steps").
    pub label: &'static str,
    pub columns: &'static [Column],
    /// The primary key: rows are exported in its order, pages continue after the last row's key.
    pub key: &'static [&'static str],
}

/// One column value. `Secret` is an opened sealed value; `Debug` redacts it.
#[derive(Debug)]
pub enum Value {
    Null,
    Integer(i64),
    Text(String),
    Boolean(bool),
    Secret(SecretString),
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Integer(a), Value::Integer(b)) => a == b,
            (Value::Text(a), Value::Text(b)) => a == b,
            (Value::Boolean(a), Value::Boolean(b)) => a == b,
            (Value::Secret(a), Value::Secret(b)) => a.expose_secret() == b.expose_secret(),
            _ => false,
        }
    }
}

/// A row: one value per column of its [`Table`], in the table's column order.
#[derive(Debug, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Table {
    /// The position of `column` in [`Table::columns`].
    pub fn position(&self, column: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == column)
    }

    /// The table's own name for errors about it.
    fn corrupt(&self, detail: impl fmt::Display) -> StoreError {
        StoreError::corrupt(Entity::Schema, format!("table {}: {detail}", self.name))
    }

    /// The text of `column` in `row` (a row ID part).
    fn text_of<'r>(&self, row: &'r Row, column: &str) -> StoreResult<&'r str> {
        match self.position(column).and_then(|i| row.0.get(i)) {
            Some(Value::Text(text)) => Ok(text),
            _ => Err(self.corrupt(format!("column {column} is not text"))),
        }
    }

    /// The row-ID parts of `sealed` in `row`.
    fn row_id_parts<'r>(&self, row: &'r Row, sealed: &SealedColumn) -> StoreResult<Vec<&'r str>> {
        sealed
            .row_id_columns()
            .iter()
            .map(|column| self.text_of(row, column))
            .collect()
    }

    /// Reads a whole row of this table from a backend's result row, opening sealed columns with `data_key`.
    pub fn read_row<C: Columns + ?Sized>(
        &self,
        columns: &C,
        data_key: &DataKey,
    ) -> StoreResult<Row> {
        let reader = CodecRow::new(columns, Entity::Schema);
        let mut values = Vec::with_capacity(self.columns.len());
        for column in self.columns {
            let value = match column.kind {
                Kind::Integer => reader.optional_integer(column.name)?.map(Value::Integer),
                Kind::Text => reader.optional_text(column.name)?.map(Value::Text),
                Kind::Boolean => reader.optional_boolean(column.name)?.map(Value::Boolean),
                // Opened below, once the row-ID columns are read.
                Kind::Sealed(_) => None,
            };
            values.push(value.unwrap_or(Value::Null));
        }
        let mut row = Row(values);
        for (index, column) in self.columns.iter().enumerate() {
            if let Kind::Sealed(sealed) = column.kind {
                let ciphertext = reader.bytes(column.name)?;
                let opened =
                    sealed.open(data_key, &self.row_id_parts(&row, sealed)?, &ciphertext)?;
                row.0[index] = Value::Secret(opened);
            }
        }
        Ok(row)
    }

    /// The ciphertext a target stores for the sealed column at `index` of `row`, sealed with its `data_key`.
    pub fn seal_value(&self, row: &Row, index: usize, data_key: &DataKey) -> StoreResult<Vec<u8>> {
        let column = self
            .columns
            .get(index)
            .ok_or_else(|| self.corrupt(format!("no column {index}")))?;
        let (Kind::Sealed(sealed), Some(Value::Secret(secret))) = (column.kind, row.0.get(index))
        else {
            return Err(self.corrupt(format!("column {} holds no secret", column.name)));
        };
        sealed.seal(data_key, &self.row_id_parts(row, sealed)?, secret)
    }

    /// The key values of `row`, in [`Table::key`] order.
    pub fn key_values<'r>(&self, row: &'r Row) -> StoreResult<Vec<&'r Value>> {
        self.key
            .iter()
            .map(|column| {
                self.position(column)
                    .and_then(|i| row.0.get(i))
                    .ok_or_else(|| self.corrupt(format!("no key column {column}")))
            })
            .collect()
    }
}

/// A store whose tables can be read whole, page by page.
pub trait ExportRows: Send + Sync {
    /// Up to `limit` rows of `table` in key order, after the row `after` (from the start when `None`).
    fn export_rows<'a>(
        &'a self,
        table: &'static Table,
        after: Option<&'a Row>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<Row>>;
}

/// How many rows of each table a copy wrote, in [`TABLES`] order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub tables: Vec<(&'static Table, u64)>,
}

impl CopyReport {
    /// The count for the table named `name` (0 when it was not copied).
    pub fn count(&self, name: &str) -> u64 {
        self.tables
            .iter()
            .find(|(table, _)| table.name == name)
            .map_or(0, |(_, count)| *count)
    }
}

const fn integer(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Integer,
    }
}

const fn text(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Text,
    }
}

const fn boolean(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Boolean,
    }
}

const fn sealed(column: &'static SealedColumn) -> Column {
    Column {
        name: column.column,
        kind: Kind::Sealed(column),
    }
}

/// Tables that are not copied (see the module documentation).
pub const NOT_COPIED: &[&str] = &[
    "schema_migrations",
    "store_keys",
    "leases",
    "operation_results",
];

/// Every table a copy carries, with every column of the latest schema; parents come before the rows that refer to
/// them. A migration that adds a table or column adds it here too (both backends' tests compare this list with
/// their schema).
pub const TABLES: &[Table] = &[
    Table {
        name: "resource_groups",
        label: "resource groups",
        columns: &[
            text("subscription_key"),
            text("name_key"),
            text("subscription_id"),
            text("name"),
            text("location"),
            text("tags"),
            text("managed_by"),
            text("provisioning_state"),
            integer("created_at"),
            integer("updated_at"),
            integer("version"),
            integer("format_version"),
        ],
        key: &["subscription_key", "name_key"],
    },
    Table {
        name: "deployments",
        label: "deployments",
        columns: &[
            text("id"),
            text("scope_key"),
            text("name_key"),
            text("scope"),
            text("name"),
            text("parent_id"),
            text("location"),
            text("tags"),
            text("status"),
            text("correlation_id"),
            boolean("stack_initiated"),
            integer("created_at"),
            integer("updated_at"),
            integer("started_at"),
            integer("finished_at"),
            text("outputs"),
            text("error"),
            text("output_resources"),
            text("extensions"),
            text("owner"),
            integer("owner_expires_at"),
            integer("version"),
            integer("format_version"),
            integer("takeovers"),
            integer("takeover_progress"),
            boolean("cancel_requested"),
        ],
        key: &["id"],
    },
    Table {
        name: "deployment_requests",
        label: "deployment requests",
        columns: &[
            text("deployment_id"),
            text("request"),
            integer("format_version"),
        ],
        key: &["deployment_id"],
    },
    Table {
        name: "deployment_operations",
        label: "journal steps",
        columns: &[
            text("deployment_id"),
            integer("seq"),
            text("operation_id"),
            text("provisioning_operation"),
            text("provisioning_state"),
            text("status_code"),
            text("status_message"),
            text("target_resource"),
            text("service_request_id"),
            integer("timestamp"),
            integer("duration_ms"),
            text("extension"),
            text("request_content"),
            text("response_content"),
            integer("format_version"),
        ],
        key: &["deployment_id", "seq"],
    },
    Table {
        name: "secrets",
        label: "secrets",
        columns: &[
            text("id"),
            text("owner_kind"),
            text("owner_id"),
            text("name"),
            sealed(&SECRET_VALUE),
            integer("created_at"),
            integer("updated_at"),
        ],
        key: &["id"],
    },
    Table {
        name: "managed_resources",
        label: "inventory resources",
        columns: &[
            text("key"),
            text("resource_id"),
            text("resource_id_key"),
            text("resource_type"),
            text("resource_type_key"),
            text("api_version"),
            text("properties"),
            text("deployment_scope"),
            text("deployment_name"),
            text("deployment_scope_key"),
            text("deployment_name_key"),
            text("extension"),
            integer("created_at"),
            integer("updated_at"),
            integer("version"),
            integer("format_version"),
            boolean("detached"),
            text("applied"),
        ],
        key: &["key"],
    },
    Table {
        name: "key_vaults",
        label: "key vaults",
        columns: &[
            text("id_key"),
            text("id"),
            text("name"),
            text("location"),
            text("tags"),
            text("properties"),
            integer("created_at"),
            integer("updated_at"),
            integer("version"),
            integer("format_version"),
        ],
        key: &["id_key"],
    },
    Table {
        name: "key_vault_secret_versions",
        label: "key vault secret versions",
        columns: &[
            integer("seq"),
            text("vault_key"),
            text("name_key"),
            text("name"),
            text("version"),
            sealed(&VAULT_SECRET_VALUE),
            text("content_type"),
            boolean("enabled"),
            integer("not_before"),
            integer("expires"),
            text("tags"),
            integer("created_at"),
            integer("updated_at"),
            integer("format_version"),
        ],
        key: &["seq"],
    },
    Table {
        name: "deployment_stacks",
        label: "deployment stacks",
        columns: &[
            text("scope_key"),
            text("name_key"),
            text("scope"),
            text("name"),
            text("stack"),
            text("managed_set"),
            integer("created_at"),
            integer("updated_at"),
            integer("version"),
            integer("format_version"),
        ],
        key: &["scope_key", "name_key"],
    },
    Table {
        name: "stack_what_ifs",
        label: "stack what-if results",
        columns: &[
            text("scope_key"),
            text("name_key"),
            text("scope"),
            text("name"),
            text("result"),
            sealed(&STACK_WHAT_IF_REQUEST),
            integer("created_at"),
            integer("updated_at"),
            integer("expires_at"),
            integer("format_version"),
        ],
        key: &["scope_key", "name_key"],
    },
    Table {
        name: "host_operations",
        label: "extension host operations",
        columns: &[
            text("id"),
            text("extension_name"),
            text("extension_version"),
            sealed(&HOST_OPERATION_STATE),
            integer("created_at"),
            integer("updated_at"),
            integer("expires_at"),
            integer("format_version"),
        ],
        key: &["id"],
    },
];

/// The table named `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|table| table.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;

    #[test]
    fn every_key_and_row_id_column_exists_and_sealed_columns_sit_in_their_own_table() {
        for table in TABLES {
            for key in table.key {
                assert!(table.position(key).is_some(), "{}.{key}", table.name);
            }
            for column in table.columns {
                if let Kind::Sealed(sealed) = column.kind {
                    assert_eq!(sealed.table, table.name);
                    for part in sealed.row_id_columns() {
                        assert!(table.position(part).is_some(), "{}.{part}", table.name);
                    }
                }
            }
            assert!(!NOT_COPIED.contains(&table.name));
        }
    }

    #[test]
    fn a_value_sealed_for_the_target_opens_in_the_same_row_only() {
        let master = MasterKey::generate().expect("random");
        let (key, _) = DataKey::generate_wrapped(&master, "k").expect("wrap");
        let table = table("host_operations").expect("table");
        let row = |id: &str| {
            Row(vec![
                Value::Text(id.into()),
                Value::Text("Ext".into()),
                Value::Text("1.0.0".into()),
                Value::Secret(SecretString::from("state".to_owned())),
                Value::Integer(1),
                Value::Integer(1),
                Value::Integer(2),
                Value::Integer(1),
            ])
        };
        let sealed = table.seal_value(&row("a"), 3, &key).expect("seal");
        assert!(HOST_OPERATION_STATE.open(&key, &["a"], &sealed).is_ok());
        assert!(HOST_OPERATION_STATE.open(&key, &["b"], &sealed).is_err());
        assert!(
            table.seal_value(&row("a"), 0, &key).is_err(),
            "not a sealed column"
        );
        assert!(
            !format!("{:?}", row("a")).contains("state"),
            "Debug redacts secrets"
        );
    }
}
