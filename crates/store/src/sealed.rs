//! Where the stored schema keeps sealed values, and the associated data each ciphertext is bound to. Every backend
//! seals the same columns the same way (table, row ID, column; see [`crate::crypto::Aad`]), so the rules live here
//! once: a backend's reads and writes and a copy between backends use the same [`SealedColumn`].

use secrecy::SecretString;
use serde_json::Value;

use crate::crypto::{Aad, DataKey};
use crate::error::StoreResult;

/// How a sealed value's row ID is formed from its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowId {
    /// The value of one column.
    Column(&'static str),
    /// The JSON array of these columns' values (`["a","b"]`): unambiguous whatever characters the parts hold.
    JsonArray(&'static [&'static str]),
}

/// A column holding sealed values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealedColumn {
    pub table: &'static str,
    pub column: &'static str,
    pub row_id: RowId,
}

/// `secrets.value`, bound to the secret's reference.
pub const SECRET_VALUE: SealedColumn = SealedColumn {
    table: "secrets",
    column: "value",
    row_id: RowId::Column("id"),
};

/// `key_vault_secret_versions.value`, bound to `[vault_key, name_key, version]`.
pub const VAULT_SECRET_VALUE: SealedColumn = SealedColumn {
    table: "key_vault_secret_versions",
    column: "value",
    row_id: RowId::JsonArray(&["vault_key", "name_key", "version"]),
};

/// `stack_what_ifs.request`, bound to `[scope_key, name_key]`: a request copied onto another result's row does not
/// open there.
pub const STACK_WHAT_IF_REQUEST: SealedColumn = SealedColumn {
    table: "stack_what_ifs",
    column: "request",
    row_id: RowId::JsonArray(&["scope_key", "name_key"]),
};

/// `host_operations.state`, bound to the operation's id.
pub const HOST_OPERATION_STATE: SealedColumn = SealedColumn {
    table: "host_operations",
    column: "state",
    row_id: RowId::Column("id"),
};

impl SealedColumn {
    /// The columns the row ID is formed from, in order.
    pub fn row_id_columns(&self) -> &[&'static str] {
        match &self.row_id {
            RowId::Column(column) => std::slice::from_ref(column),
            RowId::JsonArray(columns) => columns,
        }
    }

    /// The row ID of the row whose [`SealedColumn::row_id_columns`] hold `parts`.
    pub fn row_id(&self, parts: &[&str]) -> String {
        match self.row_id {
            RowId::Column(_) => parts.concat(),
            RowId::JsonArray(_) => {
                Value::Array(parts.iter().map(|part| Value::from(*part)).collect()).to_string()
            }
        }
    }

    /// Seals `secret` for the row whose row-ID columns hold `parts`.
    pub fn seal(
        &self,
        key: &DataKey,
        parts: &[&str],
        secret: &SecretString,
    ) -> StoreResult<Vec<u8>> {
        let row_id = self.row_id(parts);
        key.seal_secret(Aad::new(self.table, &row_id, self.column), secret)
    }

    /// Opens a value sealed for the row whose row-ID columns hold `parts`.
    pub fn open(&self, key: &DataKey, parts: &[&str], sealed: &[u8]) -> StoreResult<SecretString> {
        let row_id = self.row_id(parts);
        key.open_secret(Aad::new(self.table, &row_id, self.column), sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;
    use secrecy::ExposeSecret;

    #[test]
    fn row_ids_are_the_column_or_a_json_array() {
        assert_eq!(SECRET_VALUE.row_id(&["ref-1"]), "ref-1");
        assert_eq!(
            VAULT_SECRET_VALUE.row_id(&["/subscriptions/s/v", "n\"ame", "0a"]),
            r#"["/subscriptions/s/v","n\"ame","0a"]"#
        );
        assert_eq!(
            STACK_WHAT_IF_REQUEST.row_id_columns(),
            ["scope_key", "name_key"]
        );
        assert_eq!(HOST_OPERATION_STATE.row_id_columns(), ["id"]);
    }

    #[test]
    fn a_value_opens_only_in_its_own_row() {
        let master = MasterKey::generate().expect("random");
        let (key, _) = DataKey::generate_wrapped(&master, "k").expect("wrap");
        let secret = SecretString::from("v".to_owned());
        let sealed = STACK_WHAT_IF_REQUEST
            .seal(&key, &["a", "b"], &secret)
            .expect("seal");
        let opened = STACK_WHAT_IF_REQUEST
            .open(&key, &["a", "b"], &sealed)
            .expect("open");
        assert_eq!(opened.expose_secret(), "v");
        assert!(
            STACK_WHAT_IF_REQUEST
                .open(&key, &["a", "c"], &sealed)
                .is_err()
        );
        assert!(HOST_OPERATION_STATE.open(&key, &["a"], &sealed).is_err());
    }
}
