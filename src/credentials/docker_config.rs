//! The kubelet's docker config model: `DockerConfig` (registry key → entry) and
//! `DockerConfigEntry`, decoded the way `encoding/json` and the kubelet's custom
//! `UnmarshalJSON` do it.
//!
//! Source: kubernetes `pkg/credentialprovider/config.go` (`DockerConfigJSON`,
//! `DockerConfig`, `DockerConfigEntry.UnmarshalJSON`, `decodeDockerConfigFieldAuth`) and
//! `pkg/credentialprovider/secrets/secrets.go` (which of the two shapes a secret holds).
//!
//! Go `encoding/json` rules reproduced here, because a Rust `serde` derive would differ:
//! - struct field names match case-insensitively (`Username`, `USERNAME`, `username`), and
//!   when a field appears twice the later one wins;
//! - `null` leaves a string field empty; any other non-string value is an error;
//! - unknown fields (`identitytoken`, `registrytoken`, `serveraddress`, `credHelpers`, …)
//!   are ignored;
//! - a duplicated map key keeps the later value, but both values are decoded, so an error
//!   in either fails the whole document.
//!
//! Error messages never contain a JSON value: syntax errors give only line and column,
//! type errors only the field name and the JSON type found.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::secret::Secret;

/// One registry entry of a docker config: the only fields the kubelet reads.
///
/// `identitytoken`, `registrytoken` and `serveraddress` are ignored, as in the kubelet
/// (kubelet `pkg/credentialprovider/config.go` `DockerConfigEntry.UnmarshalJSON`). When `auth` is present and non-empty it overrides `username` and
/// `password`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DockerConfigEntry {
    /// May be empty (the kubelet accepts `base64(":password")`).
    pub username: String,
    /// May contain `:`; only the first `:` of a decoded `auth` separates the two.
    pub password: Secret,
    /// Informational only; never sent anywhere.
    pub email: String,
}

impl DockerConfigEntry {
    /// Decodes one entry from its JSON text, e.g. `{"auth":"Zm9vOmJhcg==","email":"x@y"}`.
    ///
    /// Errors: invalid JSON, a non-object entry, a non-string field, or an `auth` that is
    /// not `base64(username:password)` ([`DockerConfigError`]).
    pub fn from_json(bytes: &[u8]) -> Result<Self, DockerConfigError> {
        let node = Json::parse(bytes)?;
        decode_entry(&node, None)
    }
}

/// A kubelet `DockerConfig`: registry key (as written, e.g. `https://index.docker.io/v1/`,
/// `*.example.com:5000/team`) → entry.
///
/// Iteration is sorted by key. Go iterates the map in an unspecified order, which only
/// matters when two keys of one file index to the same keyring key (`quay.io` and
/// `https://quay.io/v1/`); pullcheck then tries them in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DockerConfig {
    entries: BTreeMap<String, DockerConfigEntry>,
}

impl DockerConfig {
    /// An empty config.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes a `.dockerconfigjson` / `config.json` document: `{"auths": {<key>: <entry>}}`.
    /// `HttpHeaders` must be an object of strings if present; every other top-level field
    /// (`credHelpers`, `credsStore`, …) is ignored. `null` gives an empty config.
    ///
    /// Errors: see [`DockerConfigError`].
    pub fn from_config_json(bytes: &[u8]) -> Result<Self, DockerConfigError> {
        let node = Json::parse(bytes)?;
        let fields = match &node {
            Json::Null => return Ok(Self::new()),
            Json::Object(fields) => fields,
            other => {
                return Err(DockerConfigError::NotAnObject {
                    what: "the document",
                    key: None,
                    found: other.kind(),
                });
            }
        };
        if let Some(headers) = Json::field(fields, "HttpHeaders") {
            check_string_map(headers, "HttpHeaders")?;
        }
        match Json::field(fields, "auths") {
            None | Some(Json::Null) => Ok(Self::new()),
            Some(auths) => decode_map(auths, "\"auths\""),
        }
    }

    /// Decodes a legacy `.dockercfg` document: a bare map `{<key>: <entry>}`. `null` gives
    /// an empty config.
    ///
    /// Errors: see [`DockerConfigError`].
    pub fn from_dockercfg(bytes: &[u8]) -> Result<Self, DockerConfigError> {
        let node = Json::parse(bytes)?;
        decode_map(&node, "the document")
    }

    /// Adds or replaces the entry for `key`.
    pub fn insert(&mut self, key: impl Into<String>, entry: DockerConfigEntry) {
        self.entries.insert(key.into(), entry);
    }

    #[cfg(test)]
    /// The entry stored under exactly `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&DockerConfigEntry> {
        self.entries.get(key)
    }

    /// Entries in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &DockerConfigEntry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of keys.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if there are no keys.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Why a docker config document was rejected. Never contains a JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerConfigError {
    /// The bytes are not JSON (`category` is `syntax`, `eof` or `data`).
    #[error("not valid JSON ({category} error at line {line} column {column})")]
    Syntax {
        /// serde_json's error category.
        category: &'static str,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// The document, the `auths` map or an entry is not a JSON object.
    #[error("{}{what} must be a JSON object, found {found}", key_prefix(key))]
    NotAnObject {
        /// What was expected to be an object.
        what: &'static str,
        /// The registry key, for an entry.
        key: Option<String>,
        /// The JSON type found.
        found: &'static str,
    },
    /// A field that must be a string (or null) holds another JSON type.
    #[error("{}field \"{field}\" must be a string, found {found}", key_prefix(key))]
    FieldType {
        /// The registry key, when inside an entry.
        key: Option<String>,
        /// The field name as the decoder knows it (e.g. `email`).
        field: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// The `auth` field of an entry does not decode.
    #[error("{}{reason}", key_prefix(key))]
    Auth {
        /// The registry key, when inside a map.
        key: Option<String>,
        /// What went wrong.
        reason: AuthFieldError,
    },
}

impl DockerConfigError {}

fn key_prefix(key: &Option<String>) -> String {
    match key {
        Some(k) => format!("key {k:?}: "),
        None => String::new(),
    }
}

/// Why an `auth` field is not `base64(username:password)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFieldError {
    /// Not base64 in the encoding chosen by the kubelet's rule (padded → standard with
    /// padding, otherwise standard without padding).
    #[error("auth is not base64(username:password): invalid {} base64", if *.padded { "padded" } else { "unpadded" })]
    Base64 {
        /// Whether the padded (`StdEncoding`) decoder was used.
        padded: bool,
    },
    /// Decodes, but the text has no `:`.
    #[error("auth is not base64(username:password): the decoded text has no ':'")]
    NoColon,
    /// Decodes to bytes that are not UTF-8. The kubelet would pass such bytes on;
    /// pullcheck rejects them (a deliberate, documented deviation).
    #[error("auth is not base64(username:password): the decoded bytes are not UTF-8")]
    NotUtf8,
    /// Decodes to `:password`. The kubelet accepts that; the docker CLI (and so
    /// pullcheck's reading of `~/.docker/config.json`) rejects it.
    #[error(
        "auth is not base64(username:password): the username is empty, which the docker CLI rejects"
    )]
    EmptyUsername,
}

const PADDED: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

const UNPADDED: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// Decodes an `auth` field into `(username, password)` the way the kubelet's
/// `decodeDockerConfigFieldAuth` does (config.go):
///
/// - if the whitespace-trimmed field ends with `=`, Go's `StdEncoding` (padding required),
///   otherwise `RawStdEncoding` (no padding allowed);
/// - `\r` and `\n` anywhere are ignored and non-zero trailing bits are accepted, as in
///   Go's non-strict decoder; any other whitespace is an error;
/// - split at the **first** `:`, so the password may contain `:` and the username may be
///   empty.
///
/// Errors: [`AuthFieldError`]; the message never contains the field.
pub fn decode_auth_field(field: &str) -> Result<(String, Secret), AuthFieldError> {
    let padded = field.trim().ends_with('=');
    let decoded = go_base64(field, padded).ok_or(AuthFieldError::Base64 { padded })?;
    let text = String::from_utf8(decoded).map_err(|_| AuthFieldError::NotUtf8)?;
    match text.split_once(':') {
        Some((user, pass)) => Ok((user.to_owned(), Secret::new(pass))),
        None => Err(AuthFieldError::NoColon),
    }
}

/// Go's `base64.StdEncoding` (`padded`) or `RawStdEncoding` decoder: `\r` and `\n` are
/// skipped, non-zero trailing bits are accepted.
pub(crate) fn go_base64(s: &str, padded: bool) -> Option<Vec<u8>> {
    let cleaned: Vec<u8> = s.bytes().filter(|b| *b != b'\r' && *b != b'\n').collect();
    let engine = if padded { &PADDED } else { &UNPADDED };
    engine.decode(&cleaned).ok()
}

/// Decodes `{<key>: <entry>}`; `null` is empty.
fn decode_map(node: &Json, what: &'static str) -> Result<DockerConfig, DockerConfigError> {
    let fields = match node {
        Json::Null => return Ok(DockerConfig::new()),
        Json::Object(fields) => fields,
        other => {
            return Err(DockerConfigError::NotAnObject {
                what,
                key: None,
                found: other.kind(),
            });
        }
    };
    let mut config = DockerConfig::new();
    for (key, value) in fields {
        let entry = decode_entry(value, Some(key))?;
        config.insert(key.clone(), entry);
    }
    Ok(config)
}

/// The kubelet's `DockerConfigEntry.UnmarshalJSON`.
fn decode_entry(node: &Json, key: Option<&str>) -> Result<DockerConfigEntry, DockerConfigError> {
    let [username, password, email, auth] = string_fields(
        node,
        ["username", "password", "email", "auth"],
        key,
        "the entry",
    )?;
    let mut entry = DockerConfigEntry {
        username: username.unwrap_or_default(),
        password: Secret::new(password.unwrap_or_default()),
        email: email.unwrap_or_default(),
    };
    if let Some(auth) = auth.filter(|a| !a.is_empty()) {
        let (user, pass) = decode_auth_field(&auth).map_err(|reason| DockerConfigError::Auth {
            key: key.map(str::to_owned),
            reason,
        })?;
        entry.username = user;
        entry.password = pass;
    }
    Ok(entry)
}

/// Reads the named string fields of a JSON object with Go's rules (case-insensitive
/// names, last occurrence wins, `null` = absent). `null` as the whole node gives all
/// `None`; any other non-object is an error.
pub(crate) fn string_fields<const N: usize>(
    node: &Json,
    names: [&str; N],
    key: Option<&str>,
    what: &'static str,
) -> Result<[Option<String>; N], DockerConfigError> {
    let mut out: [Option<String>; N] = std::array::from_fn(|_| None);
    let fields = match node {
        Json::Null => return Ok(out),
        Json::Object(fields) => fields,
        other => {
            return Err(DockerConfigError::NotAnObject {
                what,
                key: key.map(str::to_owned),
                found: other.kind(),
            });
        }
    };
    for (name, value) in fields {
        let Some(slot) = names.iter().position(|n| go_field_eq(n, name)) else {
            continue;
        };
        match value {
            Json::Null => {}
            Json::String(s) => out[slot] = Some(s.clone()),
            other => {
                return Err(DockerConfigError::FieldType {
                    key: key.map(str::to_owned),
                    field: names[slot].to_owned(),
                    found: other.kind(),
                });
            }
        }
    }
    Ok(out)
}

/// Checks that `node` is `null` or an object whose values are strings or `null`
/// (Go `map[string]string`), and returns its string entries in document order.
pub(crate) fn check_string_map(
    node: &Json,
    field: &'static str,
) -> Result<Vec<(String, String)>, DockerConfigError> {
    match node {
        Json::Null => Ok(Vec::new()),
        Json::Object(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for (k, v) in fields {
                match v {
                    Json::Null => out.push((k.clone(), String::new())),
                    Json::String(s) => out.push((k.clone(), s.clone())),
                    other => {
                        return Err(DockerConfigError::FieldType {
                            key: Some(k.clone()),
                            field: field.to_owned(),
                            found: other.kind(),
                        });
                    }
                }
            }
            Ok(out)
        }
        other => Err(DockerConfigError::FieldType {
            key: None,
            field: field.to_owned(),
            found: other.kind(),
        }),
    }
}

/// Go `encoding/json` field-name matching: equal under Unicode simple case folding. For
/// the ASCII names used here that is ASCII case-insensitivity plus `ſ` (U+017F) ≡ `s` and
/// the Kelvin sign (U+212A) ≡ `k`.
pub(crate) fn go_field_eq(field: &str, json_key: &str) -> bool {
    let fold = |c: char| match c {
        '\u{017F}' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    };
    field.chars().map(fold).eq(json_key.chars().map(fold))
}

/// A JSON value that keeps object members in document order (serde_json's `Value` sorts
/// them), so Go's "later duplicate wins" rule can be reproduced. Numbers and booleans are
/// kept only as their type: nothing here needs their value, and not keeping them keeps
/// them out of error messages.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool,
    Number,
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses JSON text; errors carry only serde_json's category, line and column.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Json, DockerConfigError> {
        serde_json::from_slice(bytes).map_err(|e| DockerConfigError::Syntax {
            category: match e.classify() {
                serde_json::error::Category::Io => "io",
                serde_json::error::Category::Syntax => "syntax",
                serde_json::error::Category::Data => "data",
                serde_json::error::Category::Eof => "eof",
            },
            line: e.line(),
            column: e.column(),
        })
    }

    /// The JSON type name, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool => "a boolean",
            Json::Number => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The last member of `fields` whose name matches `name` the Go way.
    pub(crate) fn field<'a>(fields: &'a [(String, Json)], name: &str) -> Option<&'a Json> {
        fields
            .iter()
            .rev()
            .find(|(k, _)| go_field_eq(name, k))
            .map(|(_, v)| v)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Json, E> {
        Ok(Json::Bool)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Json, E> {
        Ok(Json::Number)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Json, E> {
        Ok(Json::Number)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Json, E> {
        Ok(Json::Number)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        Json::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut fields = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            fields.push((k, v));
        }
        Ok(Json::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(json: &str) -> Result<DockerConfigEntry, DockerConfigError> {
        DockerConfigEntry::from_json(json.as_bytes())
    }

    #[test]
    fn auth_padded_and_unpadded() {
        let (u, p) = decode_auth_field("Zm9vOmJhcg==").unwrap();
        assert_eq!((u.as_str(), p.expose()), ("foo", "bar"));
        // Unpadded (RawStdEncoding) is accepted by current kubelets.
        let (u, p) = decode_auth_field("Zm9vOmJhcg").unwrap();
        assert_eq!((u.as_str(), p.expose()), ("foo", "bar"));
        // Wrong padding for the chosen encoding.
        assert_eq!(
            decode_auth_field("Zm9vOmJhcg="),
            Err(AuthFieldError::Base64 { padded: true })
        );
        // A trailing newline is ignored by Go's decoder; the padded rule sees past it.
        let (u, _) = decode_auth_field("Zm9vOmJhcg==\n").unwrap();
        assert_eq!(u, "foo");
        // Other whitespace is not.
        assert!(decode_auth_field("Zm9v OmJhcg==").is_err());
    }

    #[test]
    fn auth_split_rules() {
        let (u, p) = decode_auth_field("Zm9vOmJhcjpiYXo=").unwrap(); // foo:bar:baz
        assert_eq!((u.as_str(), p.expose()), ("foo", "bar:baz"));
        let (u, p) = decode_auth_field("OmJhcg==").unwrap(); // :bar
        assert_eq!((u.as_str(), p.expose()), ("", "bar"));
        assert_eq!(decode_auth_field("cGFudHM="), Err(AuthFieldError::NoColon));
        assert_eq!(decode_auth_field("/w=="), Err(AuthFieldError::NotUtf8));
    }

    #[test]
    fn auth_overrides_username_and_password() {
        let e = entry(r#"{"username":"a","password":"b","auth":"Zm9vOmJhcg=="}"#).unwrap();
        assert_eq!((e.username.as_str(), e.password.expose()), ("foo", "bar"));
        let e = entry(r#"{"username":"a","password":"b","auth":""}"#).unwrap();
        assert_eq!((e.username.as_str(), e.password.expose()), ("a", "b"));
    }

    #[test]
    fn go_json_field_rules() {
        let e =
            entry(r#"{"USERNAME":"a","Password":"b","email":null,"identitytoken":"t"}"#).unwrap();
        assert_eq!((e.username.as_str(), e.password.expose()), ("a", "b"));
        let e = entry(r#"{"username":"a","Username":"z"}"#).unwrap();
        assert_eq!(e.username, "z");
        assert!(entry(r#"{"email": false}"#).is_err());
        assert!(entry(r#""user:pass""#).is_err());
        assert_eq!(entry("null").unwrap(), DockerConfigEntry::default());
        assert!(go_field_eq("username", "u\u{017F}ername"));
    }

    #[test]
    fn errors_never_contain_values() {
        let err = entry(r#"{"password": 12345678, "username":"x"}"#).unwrap_err();
        assert!(!err.to_string().contains("12345678"), "{err}");
        let err =
            DockerConfig::from_dockercfg(br#"{"r.io":{"auth":"c2VjcmV0dmFsdWU"}}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "key \"r.io\": auth is not base64(username:password): the decoded text has no ':'"
        );
        let err = DockerConfig::from_dockercfg(br#"{"r.io":{"auth":"hunter2hunter2"#).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn both_shapes() {
        let json = br#"{"auths":{"b.io":{"auth":"Zm9vOmJhcg=="},"a.io":{"username":"u"}},
                        "credHelpers":{"a.io":"x"},"HttpHeaders":{"User-Agent":"y"}}"#;
        let cfg = DockerConfig::from_config_json(json).unwrap();
        let keys: Vec<_> = cfg.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a.io", "b.io"]);
        assert!(DockerConfig::from_config_json(br#"{"auths":{},"HttpHeaders":{"a":1}}"#).is_err());
        assert!(DockerConfig::from_config_json(b"null").unwrap().is_empty());
        assert!(DockerConfig::from_config_json(b"[]").is_err());
        let legacy = DockerConfig::from_dockercfg(
            br#"{"https://index.docker.io/v1/":{"auth":"Zm9vOmJhcg=="}}"#,
        )
        .unwrap();
        assert_eq!(
            legacy.get("https://index.docker.io/v1/").unwrap().username,
            "foo"
        );
    }
}
