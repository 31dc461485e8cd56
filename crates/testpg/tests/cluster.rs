//! A real throwaway cluster: password login over TCP, a wrong password refused, and the server gone
//! (port closed, directory removed) after drop, including when the owning test panics.

use std::net::TcpStream;

use cairn_testpg::TestPostgres;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

#[tokio::test]
async fn superuser_logs_in_with_its_password_only() {
    let cluster = TestPostgres::start();
    assert!(cluster.major_version() >= 13, "{cluster:?}");
    let mut connection = PgConnection::connect(&cluster.url()).await.unwrap();
    let (user, superuser): (String, bool) = sqlx::query_as(
        "SELECT current_user::text, rolsuper FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&mut connection)
    .await
    .unwrap();
    assert_eq!(user, cluster.superuser());
    assert!(superuser);
    connection.close().await.unwrap();

    let wrong = cluster
        .url()
        .replace(cluster.password(), "not-the-password");
    let err = PgConnection::connect(&wrong).await.unwrap_err();
    assert!(
        err.to_string().contains("password authentication failed"),
        "{err}"
    );
    assert!(
        cluster
            .socket_dir()
            .join(format!(".s.PGSQL.{}", cluster.port()))
            .exists()
    );
}

#[test]
fn drop_stops_the_server_and_removes_its_directory() {
    let cluster = TestPostgres::start();
    let port = cluster.port();
    let dir = cluster.socket_dir().to_owned();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(cluster);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still listening"
    );
    assert!(!dir.exists());
}

#[test]
fn a_panicking_test_still_stops_its_server() {
    let (sender, receiver) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let cluster = TestPostgres::start();
        sender.send(cluster.port()).unwrap();
        panic!("the test failed");
    })
    .join();
    assert!(outcome.is_err());
    let port = receiver.recv().unwrap();
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still listening"
    );
}

#[test]
fn clusters_run_side_by_side() {
    let first = TestPostgres::start();
    let second = TestPostgres::start();
    assert_ne!(first.port(), second.port());
    assert_ne!(first.password(), second.password());
}
