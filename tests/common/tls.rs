//! Test harness: TLS certificates made by the test with the `openssl` CLI,
//! and `redis-server` with TLS ports.
//!
//! [`TestCerts::generate`] writes into a temporary folder of the test: a CA,
//! a server certificate for `127.0.0.1` and `localhost` signed by it (also
//! good as a client certificate: Redis presents it to its peers in a TLS
//! cluster and to its primary), a client certificate signed by the CA, and
//! a second, unrelated CA (the "wrong CA"). EC P-256 keys: quick to make.
//!
//! [`RedisServer::start_tls`] starts a TLS-only server (`--port 0`),
//! [`RedisServer::cli`] talks to it with `redis-cli --tls`.

use super::{free_port, RedisServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const INSTALL_OPENSSL: &str = "openssl was not found on PATH. The TLS tests make their \
certificates with the openssl command: Debian/Ubuntu `sudo apt-get install openssl`, \
Fedora `sudo dnf install openssl`, macOS `brew install openssl`.";

/// Certificates of one test, in their own folder (removed on drop).
#[derive(Debug)]
pub struct TestCerts {
    /// The CA that signed the server and client certificates.
    pub ca_pem_path: PathBuf,
    pub ca_pem: Vec<u8>,
    /// The server's certificate and key (PEM files): SAN `IP:127.0.0.1`,
    /// `DNS:localhost`; extended key usage server and client.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate signed by the CA, and its key (PKCS#8).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub client_cert_pem: Vec<u8>,
    pub client_key_pem: Vec<u8>,
    /// A CA that signed nothing here.
    pub wrong_ca_path: PathBuf,
    pub wrong_ca_pem: Vec<u8>,
    pub dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = match Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_OPENSSL}"),
        Err(e) => panic!("could not run openssl: {e}"),
    };
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA `name.pem` with its key `name.key`.
fn make_ca(dir: &Path, name: &str, cn: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={cn}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// A leaf `name.pem`/`name.key` signed by `ca`, with the extensions `ext`.
fn make_leaf(dir: &Path, ca: &str, (name, serial): (&str, u32), cn: &str, ext: &str) {
    let ext_file = format!("{name}.ext");
    std::fs::write(dir.join(&ext_file), ext).expect("write the extensions file");
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-set_serial",
            &serial.to_string(),
            "-days",
            "2",
            "-extfile",
            &ext_file,
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

impl TestCerts {
    /// Make a fresh set in a new temporary folder.
    pub fn generate() -> Arc<Self> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "floodgate-certs-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir for certificates");
        make_ca(&dir, "ca", "floodgate test CA");
        make_ca(&dir, "wrong-ca", "floodgate wrong CA");
        make_leaf(
            &dir,
            "ca",
            ("server", 1001),
            "localhost",
            "basicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyAgreement\n\
             extendedKeyUsage=serverAuth,clientAuth\n\
             subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        );
        make_leaf(
            &dir,
            "ca",
            ("client", 1002),
            "floodgate test client",
            "basicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyAgreement\n\
             extendedKeyUsage=clientAuth\n",
        );
        let read = |f: &str| std::fs::read(dir.join(f)).expect("read a certificate");
        Arc::new(Self {
            ca_pem_path: dir.join("ca.pem"),
            ca_pem: read("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            client_cert_pem: read("client.pem"),
            client_key_pem: read("client.key"),
            wrong_ca_path: dir.join("wrong-ca.pem"),
            wrong_ca_pem: read("wrong-ca.pem"),
            dir,
        })
    }

    /// `redis-server` arguments of the certificate files.
    pub fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert-file".into(),
            self.server_cert.display().to_string(),
            "--tls-key-file".into(),
            self.server_key.display().to_string(),
            "--tls-ca-cert-file".into(),
            self.ca_pem_path.display().to_string(),
        ]
    }

    /// `redis-cli` arguments to talk TLS to a server of these
    /// certificates: the CA, and the client certificate.
    pub fn cli_args(&self) -> Vec<String> {
        vec![
            "--tls".into(),
            "--cacert".into(),
            self.ca_pem_path.display().to_string(),
            "--cert".into(),
            self.client_cert.display().to_string(),
            "--key".into(),
            self.client_key.display().to_string(),
        ]
    }

    /// `redis-server` arguments of a TLS node of a cluster: TLS-only on
    /// `port`, cluster bus and replication over TLS too.
    pub fn cluster_node_args(&self, port: u16) -> Vec<String> {
        let mut args: Vec<String> = ["--port", "0", "--tls-port", &port.to_string()]
            .map(String::from)
            .into();
        args.extend(self.server_args());
        args.extend(
            [
                "--tls-cluster",
                "yes",
                "--tls-replication",
                "yes",
                "--tls-auth-clients",
                "optional",
            ]
            .map(String::from),
        );
        args
    }
}

impl Drop for TestCerts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a TLS server is started.
#[derive(Debug, Clone, Copy, Default)]
pub struct TlsOptions {
    /// `--tls-auth-clients yes`: a client must show a certificate of the
    /// CA. Else `no`: the server asks for none.
    pub auth_clients: bool,
    /// Also listen without TLS on a plain port ([`RedisServer::url`],
    /// [`RedisServer::cmd`] then work); else the server is TLS-only.
    pub plain_port: bool,
}

/// The TLS settings of a running [`RedisServer`].
pub(crate) struct ServerTls {
    certs: Arc<TestCerts>,
    options: TlsOptions,
    plain_port: Option<u16>,
}

impl ServerTls {
    /// `redis-server` arguments: the ports and certificates.
    pub(crate) fn args(&self, tls_port: u16) -> Vec<String> {
        let plain = self.plain_port.unwrap_or(0).to_string();
        let mut args: Vec<String> = ["--port", &plain, "--tls-port", &tls_port.to_string()]
            .map(String::from)
            .into();
        args.extend(self.certs.server_args());
        args.push("--tls-auth-clients".into());
        args.push(
            if self.options.auth_clients {
                "yes"
            } else {
                "no"
            }
            .into(),
        );
        args
    }

    pub(crate) fn plain_port(&self) -> Option<u16> {
        self.plain_port
    }

    pub(crate) fn certs(&self) -> &TestCerts {
        &self.certs
    }
}

impl RedisServer {
    /// Start a TLS server of `certs` on a free port (no plain port,
    /// clients need not show a certificate).
    pub fn start_tls(certs: &Arc<TestCerts>) -> Self {
        Self::start_tls_with(certs, TlsOptions::default(), &[])
    }

    /// Start a TLS server of `certs` with `options` and extra arguments.
    pub fn start_tls_with(certs: &Arc<TestCerts>, options: TlsOptions, extra: &[&str]) -> Self {
        let tls = ServerTls {
            certs: certs.clone(),
            options,
            plain_port: options.plain_port.then(free_port),
        };
        Self::launch(std::path::PathBuf::from("redis-server"), Some(tls), extra)
    }

    /// `rediss://127.0.0.1:PORT` of a TLS server.
    pub fn tls_url(&self) -> String {
        assert!(self.tls.is_some(), "not a TLS server: use url()");
        format!("rediss://127.0.0.1:{}", self.port)
    }

    /// The certificates of a TLS server.
    pub fn certs(&self) -> &Arc<TestCerts> {
        &self.tls.as_ref().expect("a TLS server").certs
    }

    /// Run one command with `redis-cli` (over TLS on a TLS server, with the
    /// CA and the client certificate) and return its raw output, trimmed;
    /// `Err` with what it printed when it fails or answers an error.
    pub fn cli(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if let Some(t) = &self.tls {
            cmd.args(t.certs.cli_args());
        }
        run_cli(cmd.args(args))
    }
}

/// Run a `redis-cli` command: its output, trimmed, or `Err` with what it
/// printed if it failed or the server answered an error.
pub fn run_cli(cmd: &mut Command) -> Result<String, String> {
    let out = match cmd.stdin(Stdio::null()).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{}", super::INSTALL),
        Err(e) => panic!("could not run redis-cli: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    // redis-cli exits 0 on an error reply (printed as `ERR ...` or
    // `(error) ...`) and on a failed connection (message on stderr).
    if !out.status.success()
        || stdout.is_empty() && !stderr.is_empty()
        || stdout.starts_with("ERR ")
        || stdout.starts_with("(error)")
        || stdout.starts_with("NOAUTH")
        || stdout.starts_with("WRONGPASS")
    {
        return Err(format!("{stdout}{stderr}"));
    }
    Ok(stdout)
}

/// One command to the TLS server at `port` of `certs`, with
/// `openssl s_client` (shown the CA and the client certificate): the
/// command and a `QUIT` go out as RESP, the first reply is parsed as the
/// `redis` crate does. For inspecting TLS-only servers, whose TLS the
/// `redis` crate of the dev-dependencies does not speak.
pub fn tls_query<T: redis::FromRedisValue>(
    certs: &TestCerts,
    port: u16,
    args: &[&str],
) -> redis::RedisResult<T> {
    use std::io::Write;
    let mut resp = Vec::new();
    for command in [args, &["QUIT"]] {
        resp.extend_from_slice(format!("*{}\r\n", command.len()).as_bytes());
        for a in command {
            resp.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    let (ca, cert, key) = (
        certs.ca_pem_path.display().to_string(),
        certs.client_cert.display().to_string(),
        certs.client_key.display().to_string(),
    );
    let mut child = match Command::new("openssl")
        .args(["s_client", "-quiet", "-verify_return_error"])
        .args(["-connect", &format!("127.0.0.1:{port}")])
        .args(["-CAfile", &ca, "-cert", &cert, "-key", &key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_OPENSSL}"),
        Err(e) => panic!("could not run openssl s_client: {e}"),
    };
    // The server answers QUIT and closes: s_client then exits. A server
    // that answers nothing (paused, gone) fails the query after 10 s.
    let _ = child.stdin.take().expect("stdin").write_all(&resp);
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut bytes);
        bytes
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!("no TLS reply from {port} in 10 s")).into());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stdout = reader.join().expect("reader thread");
    if stdout.is_empty() {
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        return Err(
            std::io::Error::other(format!("no TLS reply from {port}: {}", stderr.trim())).into(),
        );
    }
    let value = redis::parse_redis_value(&stdout)?.extract_error()?;
    Ok(redis::from_redis_value(value)?)
}
