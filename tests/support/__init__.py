"""What the tests share: stand-in models and servers, a gateway on loopback, PostgreSQL
databases per test, and the child processes the crash and reliability tests run."""
