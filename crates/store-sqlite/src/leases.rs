//! Named leases with heartbeat. A released lease keeps its row with no owner, so its generation (the fencing
//! token) keeps counting up across owners.

use cairn_store::codec::{self, signed};
use cairn_store::{Entity, Lease, StoreError, StoreResult, Timestamp};
use sqlx::sqlite::SqliteRow;

use crate::SqliteStore;
use crate::rows::{backend, decode};

const E: Entity = Entity::Lease;

fn lease_from_row(row: &SqliteRow) -> StoreResult<Option<Lease>> {
    decode(row, E, codec::lease)
}

const SELECT_LEASE: &str = "SELECT name, owner, generation, acquired_at, heartbeat_at, expires_at FROM leases WHERE name = ?1";

impl SqliteStore {
    pub(crate) async fn acquire_lease_impl(
        &self,
        name: &str,
        owner: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Lease> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(SELECT_LEASE)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?;
        let (current, generation) = match &row {
            Some(row) => (
                lease_from_row(row)?,
                decode(row, E, |row| row.unsigned("generation"))?,
            ),
            None => (None, 0),
        };
        let lease = match current {
            Some(held) if held.owner == owner => Lease {
                heartbeat_at: now,
                expires_at,
                ..held
            },
            Some(held) if held.expires_at > now => {
                return Err(StoreError::conflict(
                    E,
                    name,
                    format!(
                        "held by '{}' until {} ms",
                        held.owner,
                        held.expires_at.unix_millis()
                    ),
                ));
            }
            // Free, released or expired: a new holder, so a new generation.
            _ => Lease {
                name: name.to_owned(),
                owner: owner.to_owned(),
                generation: generation + 1,
                acquired_at: now,
                heartbeat_at: now,
                expires_at,
            },
        };
        sqlx::query(
            "INSERT INTO leases (name, owner, generation, acquired_at, heartbeat_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, \
             generation = excluded.generation, acquired_at = excluded.acquired_at, \
             heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at",
        )
        .bind(&lease.name)
        .bind(&lease.owner)
        .bind(signed(lease.generation))
        .bind(lease.acquired_at.unix_millis())
        .bind(lease.heartbeat_at.unix_millis())
        .bind(lease.expires_at.unix_millis())
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(lease)
    }

    pub(crate) async fn renew_lease_impl(
        &self,
        name: &str,
        owner: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Lease> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(SELECT_LEASE)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?;
        let held = match row.as_ref().map(lease_from_row).transpose()?.flatten() {
            None => return Err(StoreError::not_found(E, name)),
            Some(held) if held.owner != owner => {
                return Err(StoreError::conflict(
                    E,
                    name,
                    format!("held by '{}'", held.owner),
                ));
            }
            Some(held) => held,
        };
        sqlx::query("UPDATE leases SET heartbeat_at = ?2, expires_at = ?3 WHERE name = ?1")
            .bind(name)
            .bind(now.unix_millis())
            .bind(expires_at.unix_millis())
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(Lease {
            heartbeat_at: now,
            expires_at,
            ..held
        })
    }

    pub(crate) async fn release_lease_impl(&self, name: &str, owner: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(SELECT_LEASE)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?;
        match row.as_ref().map(lease_from_row).transpose()?.flatten() {
            None => return Ok(()),
            Some(held) if held.owner != owner => {
                return Err(StoreError::conflict(
                    E,
                    name,
                    format!("held by '{}'", held.owner),
                ));
            }
            Some(_) => {}
        }
        sqlx::query("UPDATE leases SET owner = NULL WHERE name = ?1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    pub(crate) async fn get_lease_impl(&self, name: &str) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(SELECT_LEASE)
            .bind(name)
            .fetch_optional(&self.reader)
            .await
            .map_err(backend)?;
        Ok(row.as_ref().map(lease_from_row).transpose()?.flatten())
    }
}
