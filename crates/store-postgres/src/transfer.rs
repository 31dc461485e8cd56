//! Whole-store copies (`cairn_store::transfer`): this store's tables read page by page ([`ExportRows`]), and a
//! copy of another store's rows into this one in a single transaction ([`PostgresStore::import_from`]).

use cairn_store::transfer::{CopyReport, ExportRows, Kind, Row, TABLES, Table, Value};
use cairn_store::{Entity, StoreError, StoreFuture, StoreResult};
use sqlx::{AssertSqlSafe, PgConnection, Postgres, QueryBuilder};

use crate::PostgresStore;
use crate::rows::{PgColumns, backend};

/// Rows per INSERT statement: well under PostgreSQL's 65,535 bind parameters for the widest table.
const IMPORT_BATCH: usize = 500;
/// Rows per page read from the source.
const EXPORT_PAGE: u32 = 1_000;

/// Binds one value of `kind`; a NULL is bound with the column's type.
fn push_value(
    builder: &mut sqlx::query_builder::Separated<'_, Postgres, &'static str>,
    kind: Kind,
    value: Option<&Value>,
    sealed: Option<Vec<u8>>,
) {
    match (kind, value) {
        (Kind::Sealed(_), _) => builder.push_bind(sealed),
        (_, Some(Value::Integer(v))) => builder.push_bind(*v),
        (_, Some(Value::Text(v))) => builder.push_bind(v.clone()),
        (_, Some(Value::Boolean(v))) => builder.push_bind(*v),
        (Kind::Integer, _) => builder.push_bind(None::<i64>),
        (Kind::Boolean, _) => builder.push_bind(None::<bool>),
        (Kind::Text, _) => builder.push_bind(None::<String>),
    };
}

fn column_list(table: &Table) -> String {
    table
        .columns
        .iter()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Inserts `rows` of `table`, sealing their secrets with `store`'s data key.
async fn insert_rows(
    store: &PostgresStore,
    conn: &mut PgConnection,
    table: &Table,
    rows: &[Row],
) -> StoreResult<()> {
    for batch in rows.chunks(IMPORT_BATCH) {
        let mut sealed = Vec::with_capacity(batch.len());
        for row in batch {
            let mut values = Vec::with_capacity(table.columns.len());
            for (index, column) in table.columns.iter().enumerate() {
                values.push(match column.kind {
                    Kind::Sealed(_) => Some(table.seal_value(row, index, &store.data_key)?),
                    _ => None,
                });
            }
            sealed.push(values);
        }
        let mut builder: QueryBuilder<Postgres> = QueryBuilder::new(format!(
            "INSERT INTO {} ({}) ",
            table.name,
            column_list(table)
        ));
        builder.push_values(batch.iter().zip(sealed), |mut values, (row, sealed)| {
            for ((column, value), sealed) in table.columns.iter().zip(&row.0).zip(sealed) {
                push_value(&mut values, column.kind, Some(value), sealed);
            }
        });
        builder.build().execute(&mut *conn).await.map_err(backend)?;
    }
    Ok(())
}

/// How many rows each table holds.
async fn counts(conn: &mut PgConnection) -> StoreResult<Vec<(&'static Table, u64)>> {
    let mut counts = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let count: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {}",
            table.name
        )))
        .fetch_one(&mut *conn)
        .await
        .map_err(backend)?;
        counts.push((table, u64::try_from(count).unwrap_or_default()));
    }
    Ok(counts)
}

impl PostgresStore {
    /// Copies every row of every table `cairn_store::transfer::TABLES` names from `source` into this store, in one
    /// transaction: all of it or (on any failure) nothing. Sealed values are opened by the source and sealed again
    /// with this store's data key. Without `replace` this store must hold no record (else `Conflict`, naming what it
    /// holds); with it, its records (and leases) are deleted first. Returns how many rows each table received.
    pub async fn import_from(
        &self,
        source: &dyn ExportRows,
        replace: bool,
    ) -> StoreResult<CopyReport> {
        let mut tx = self.begin().await?;
        // Nobody writes while the copy runs: a replica serving this database would see half a copy.
        let tables: Vec<&str> = TABLES.iter().map(|t| t.name).chain(["leases"]).collect();
        sqlx::query(AssertSqlSafe(format!(
            "LOCK TABLE {} IN EXCLUSIVE MODE",
            tables.join(", ")
        )))
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        sqlx::query("SET CONSTRAINTS ALL DEFERRED")
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        let held: Vec<String> = counts(&mut tx)
            .await?
            .into_iter()
            .filter(|(_, count)| *count > 0)
            .map(|(table, count)| format!("{count} {}", table.label))
            .collect();
        if !held.is_empty() {
            if !replace {
                return Err(StoreError::conflict(
                    Entity::Schema,
                    "the target store",
                    format!("it is not empty (it holds {})", held.join(", ")),
                ));
            }
            sqlx::query(AssertSqlSafe(format!("TRUNCATE {}", tables.join(", "))))
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        let mut report = CopyReport::default();
        for table in TABLES {
            let mut copied = 0_u64;
            let mut after: Option<Row> = None;
            loop {
                let rows = source
                    .export_rows(table, after.as_ref(), EXPORT_PAGE)
                    .await?;
                insert_rows(self, &mut tx, table, &rows).await?;
                copied += rows.len() as u64;
                let full = rows.len() == EXPORT_PAGE as usize;
                after = rows.into_iter().last();
                if !full {
                    break;
                }
            }
            report.tables.push((table, copied));
        }
        // Identity columns continue after the copied numbers.
        sqlx::query(
            "SELECT setval(pg_get_serial_sequence('key_vault_secret_versions', 'seq'), \
             COALESCE((SELECT MAX(seq) FROM key_vault_secret_versions), 0) + 1, false)",
        )
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(report)
    }

    async fn export_rows_impl(
        &self,
        table: &'static Table,
        after: Option<&Row>,
        limit: u32,
    ) -> StoreResult<Vec<Row>> {
        let key = table.key.join(", ");
        let mut builder: QueryBuilder<Postgres> = QueryBuilder::new(format!(
            "SELECT {} FROM {} ",
            column_list(table),
            table.name
        ));
        if let Some(after) = after {
            builder.push(format!("WHERE ({key}) > ("));
            let mut values = builder.separated(", ");
            for value in table.key_values(after)? {
                // Key columns hold neither NULLs nor secrets: the kind only types a NULL.
                push_value(&mut values, Kind::Text, Some(value), None);
            }
            builder.push(") ");
        }
        builder.push(format!("ORDER BY {key} LIMIT "));
        builder.push_bind(i64::from(limit));
        let rows = builder
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|row| table.read_row(&PgColumns(row), &self.data_key))
            .collect()
    }
}

impl ExportRows for PostgresStore {
    fn export_rows<'a>(
        &'a self,
        table: &'static Table,
        after: Option<&'a Row>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<Row>> {
        Box::pin(self.export_rows_impl(table, after, limit))
    }
}
