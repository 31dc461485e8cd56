//! Named leases with heartbeat. Every change takes the lease's lock first, so of two replicas acquiring one lease
//! exactly one gets it. A released lease keeps its row with no owner, so its generation (the fencing token) keeps
//! counting up across owners.

use cairn_store::codec::{self, signed};
use cairn_store::{Entity, Lease, StoreError, StoreResult, Timestamp};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use crate::PostgresStore;
use crate::rows::{LockSpace, backend, decode, lock_key};

const E: Entity = Entity::Lease;

fn lease_from_row(row: &PgRow) -> StoreResult<Option<Lease>> {
    decode(row, E, codec::lease)
}

/// The lease row (held or released) and its generation, after taking the lease's lock.
async fn locked_lease(conn: &mut PgConnection, name: &str) -> StoreResult<(Option<Lease>, u64)> {
    lock_key(conn, LockSpace::Lease, name).await?;
    let row = sqlx::query(
        "SELECT name, owner, generation, acquired_at, heartbeat_at, expires_at FROM leases WHERE name = $1",
    )
    .bind(name)
    .fetch_optional(conn)
    .await
    .map_err(backend)?;
    match &row {
        Some(row) => Ok((
            lease_from_row(row)?,
            decode(row, E, |row| row.unsigned("generation"))?,
        )),
        None => Ok((None, 0)),
    }
}

fn held_by(name: &str, held: &Lease) -> StoreError {
    StoreError::conflict(E, name, format!("held by '{}'", held.owner))
}

impl PostgresStore {
    pub(crate) async fn acquire_lease_impl(
        &self,
        name: &str,
        owner: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Lease> {
        let mut tx = self.begin().await?;
        let (current, generation) = locked_lease(&mut tx, name).await?;
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
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, \
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
        let mut tx = self.begin().await?;
        let held = match locked_lease(&mut tx, name).await?.0 {
            None => return Err(StoreError::not_found(E, name)),
            Some(held) if held.owner != owner => return Err(held_by(name, &held)),
            Some(held) => held,
        };
        sqlx::query("UPDATE leases SET heartbeat_at = $2, expires_at = $3 WHERE name = $1")
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
        let mut tx = self.begin().await?;
        match locked_lease(&mut tx, name).await?.0 {
            None => return Ok(()),
            Some(held) if held.owner != owner => return Err(held_by(name, &held)),
            Some(_) => {}
        }
        sqlx::query("UPDATE leases SET owner = NULL WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    pub(crate) async fn get_lease_impl(&self, name: &str) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(
            "SELECT name, owner, generation, acquired_at, heartbeat_at, expires_at FROM leases WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?;
        Ok(row.as_ref().map(lease_from_row).transpose()?.flatten())
    }
}
