//! Test PKI built with the `openssl` CLI: a CA, leaf certificates for any set
//! of names and any validity window, and the token-signing certificate.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use base64::Engine as _;

/// A certificate authority on disk.
#[derive(Debug)]
pub struct Ca {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    dir: PathBuf,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

pub fn openssl(args: &[&str], cwd: &Path) -> String {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("running openssl (install the openssl package): {e}"));
    if !out.status.success() {
        panic!(
            "openssl {args:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Self-signed EC P-256 certificate, written as `<stem>.crt` / `<stem>.key` in `dir`.
/// The key is PKCS#8 PEM.
pub fn self_signed(dir: &Path, stem: &str, cn: &str, ca: bool) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let crt = dir.join(format!("{stem}.crt"));
    let key = dir.join(format!("{stem}.key"));
    let subj = format!("/CN={cn}");
    let mut args = vec![
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-sha256",
        "-days",
        "3650",
        "-subj",
        &subj,
    ];
    if ca {
        args.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        ]);
    }
    let crt_s = crt.to_str().unwrap().to_string();
    let key_s = key.to_str().unwrap().to_string();
    args.extend(["-keyout", &key_s, "-out", &crt_s]);
    openssl(&args, dir);
    (crt, key)
}

impl Ca {
    pub fn create(dir: &Path, cn: &str) -> Ca {
        let (cert_file, key_file) = self_signed(dir, "ca", cn, true);
        Ca {
            cert_file,
            key_file,
            dir: dir.to_path_buf(),
        }
    }

    /// Leaf server certificate for `names` (IP literals become IP SANs, the rest
    /// DNS SANs), valid until `not_after`. `not_before` is one hour ago, or one
    /// day before `not_after` if that is earlier (so expired certs work).
    /// Returns (cert PEM, PKCS#8 key PEM).
    pub fn issue(&self, names: &[&str], not_after: SystemTime) -> (String, String) {
        assert!(!names.is_empty(), "make_cert needs at least one name");
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        let work = self.dir.join(format!("issue-{n}"));
        std::fs::create_dir_all(work.join("newcerts")).unwrap();
        std::fs::write(work.join("index.txt"), "").unwrap();
        let mut serial = [0u8; 8];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut serial).unwrap();
        serial[0] &= 0x7f;
        serial[0] |= 0x10;
        let serial: String = serial.iter().map(|b| format!("{b:02X}")).collect();
        std::fs::write(work.join("serial"), format!("{serial}\n")).unwrap();

        let now = SystemTime::now();
        let hour_ago = now - Duration::from_secs(3600);
        let day_before_end = not_after - Duration::from_secs(86_400);
        let not_before = hour_ago.min(day_before_end);

        let mut alt = String::new();
        let (mut dns, mut ip) = (0, 0);
        for name in names {
            if name
                .trim_matches(|c| c == '[' || c == ']')
                .parse::<IpAddr>()
                .is_ok()
            {
                ip += 1;
                alt.push_str(&format!(
                    "IP.{ip} = {}\n",
                    name.trim_matches(|c| c == '[' || c == ']')
                ));
            } else {
                dns += 1;
                alt.push_str(&format!("DNS.{dns} = {name}\n"));
            }
        }
        let cnf = format!(
            "[ ca ]\ndefault_ca = tca\n\
             [ tca ]\ndir = {dir}\ndatabase = {dir}/index.txt\nserial = {dir}/serial\nnew_certs_dir = {dir}/newcerts\n\
             default_md = sha256\npolicy = pol\nunique_subject = no\ncopy_extensions = none\n\
             [ pol ]\ncommonName = supplied\n\
             [ ext ]\nbasicConstraints = critical,CA:FALSE\n\
             keyUsage = critical,digitalSignature,keyEncipherment\n\
             extendedKeyUsage = serverAuth\nsubjectAltName = @alt\n\
             [ alt ]\n{alt}",
            dir = work.display()
        );
        std::fs::write(work.join("ca.cnf"), cnf).unwrap();
        let subj = format!("/CN={}", names[0].trim_matches(|c| c == '[' || c == ']'));
        openssl(
            &[
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
                "-subj",
                &subj,
            ],
            &work,
        );
        let start = super::time::generalized_time(not_before);
        let end = super::time::generalized_time(not_after);
        openssl(
            &[
                "ca",
                "-batch",
                "-config",
                "ca.cnf",
                "-extensions",
                "ext",
                "-notext",
                "-cert",
                self.cert_file.to_str().unwrap(),
                "-keyfile",
                self.key_file.to_str().unwrap(),
                "-startdate",
                &start,
                "-enddate",
                &end,
                "-in",
                "leaf.csr",
                "-out",
                "leaf.crt",
            ],
            &work,
        );
        let cert = std::fs::read_to_string(work.join("leaf.crt")).unwrap();
        let key = std::fs::read_to_string(work.join("leaf.key")).unwrap();
        (cert, key)
    }
}

/// Decode every PEM block with this label (e.g. "CERTIFICATE", "PRIVATE KEY").
pub fn pem_blocks(pem: &str, label: &str) -> Vec<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(&begin) {
        let after = &rest[start + begin.len()..];
        let Some(stop) = after.find(&end) else { break };
        let b64: String = after[..stop]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("valid base64 in PEM"),
        );
        rest = &after[stop + end.len()..];
    }
    out
}
