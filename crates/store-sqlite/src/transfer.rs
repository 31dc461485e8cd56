//! This store's tables read page by page for a whole-store copy into another backend (`cairn_store::transfer`,
//! `cairn store copy`): every row as it is stored, sealed values opened with this store's data key.

use cairn_store::transfer::{ExportRows, Row, Table, Value};
use cairn_store::{StoreFuture, StoreResult};
use sqlx::{QueryBuilder, Sqlite};

use crate::SqliteStore;
use crate::rows::{SqliteColumns, backend};

impl SqliteStore {
    async fn export_rows_impl(
        &self,
        table: &'static Table,
        after: Option<&Row>,
        limit: u32,
    ) -> StoreResult<Vec<Row>> {
        let columns: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
        let key = table.key.join(", ");
        let mut builder: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
            "SELECT {} FROM {} ",
            columns.join(", "),
            table.name
        ));
        if let Some(after) = after {
            builder.push(format!("WHERE ({key}) > ("));
            let mut values = builder.separated(", ");
            for value in table.key_values(after)? {
                match value {
                    Value::Integer(v) => values.push_bind(*v),
                    Value::Text(v) => values.push_bind(v.clone()),
                    Value::Boolean(v) => values.push_bind(*v),
                    // Key columns hold neither NULLs nor secrets.
                    Value::Null | Value::Secret(_) => values.push_bind(None::<String>),
                };
            }
            builder.push(") ");
        }
        builder.push(format!("ORDER BY {key} LIMIT "));
        builder.push_bind(i64::from(limit));
        let rows = builder
            .build()
            .fetch_all(&self.reader)
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|row| table.read_row(&SqliteColumns(row), &self.data_key))
            .collect()
    }
}

impl ExportRows for SqliteStore {
    fn export_rows<'a>(
        &'a self,
        table: &'static Table,
        after: Option<&'a Row>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<Row>> {
        Box::pin(self.export_rows_impl(table, after, limit))
    }
}
