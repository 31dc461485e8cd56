//! `cairn-testpg`: a throwaway PostgreSQL cluster for test suites that are not Rust (the Python SDK replica test):
//! starts one as [`TestPostgres::start`] does, prints its superuser URL (to the `postgres` database) as the first
//! line of stdout, and stops it — removing its directory — when stdin reaches end of file (the test closes the pipe,
//! or exits). Without PostgreSQL installed it exits 2 with the message naming the fix.

use std::io::Write;
use std::process::ExitCode;

use cairn_testpg::TestPostgres;

fn main() -> ExitCode {
    let cluster = match TestPostgres::try_start() {
        Ok(cluster) => cluster,
        Err(message) => {
            eprintln!("cairn-testpg: {message}");
            return ExitCode::from(2);
        }
    };
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{}", cluster.url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    // Whatever arrives is ignored: only the end of stdin matters.
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    drop(cluster);
    ExitCode::SUCCESS
}
