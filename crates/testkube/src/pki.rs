//! The control plane's certificates and keys, generated afresh for every start: a CA, the API server's
//! serving certificate, client certificates for the admin and the controller-manager, and the key pair
//! service-account tokens are signed with.

use data_encoding::BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::{ADMIN_USER, Error};

/// The range the API server allocates Service cluster IPs from. Nothing routes to it (there is no
/// kube-proxy): it is bookkeeping only, the range kubeadm uses by default.
pub(crate) const SERVICE_CIDR: &str = "10.96.0.0/16";

/// The first address of [`SERVICE_CIDR`], which the API server gives the `kubernetes` Service, and so
/// one of the names its certificate must carry.
const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// The `iss` of service-account tokens (what a real cluster's default issuer looks like).
pub(crate) const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// A certificate with its private key, in PEM for files and in DER for rustls.
pub(crate) struct CertifiedKey {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
    pub(crate) cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl CertifiedKey {
    pub(crate) fn private_key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// Everything a start needs; nothing is reused between starts.
pub(crate) struct ClusterPki {
    pub(crate) ca: CertifiedKey,
    pub(crate) apiserver: CertifiedKey,
    pub(crate) admin: CertifiedKey,
    pub(crate) controller_manager: CertifiedKey,
    pub(crate) service_account_key_pem: String,
    pub(crate) service_account_public_pem: String,
}

impl ClusterPki {
    pub(crate) fn generate() -> Result<ClusterPki, Error> {
        let ca_key = key_pair("CA key")?;
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name = name("cairn-testkube-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .map_err(|source| pki_error("CA certificate", source))?;
        let ca = CertifiedKey {
            cert_pem: ca_cert.pem(),
            key_pem: ca_key.serialize_pem(),
            cert_der: ca_cert.der().clone(),
            key_der: ca_key.serialize_der(),
        };
        let issuer = Issuer::new(ca_params, ca_key);

        // Every name a client inside or outside a cluster may use for the API server.
        let apiserver = issue(
            &issuer,
            "API server certificate",
            name("kube-apiserver", None),
            [
                "127.0.0.1",
                "localhost",
                KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ]
            .map(String::from)
            .to_vec(),
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        // Client certificates: the common name is the user, the organizations are the groups.
        let admin = issue(
            &issuer,
            "admin client certificate",
            name(ADMIN_USER, Some("system:masters")),
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let controller_manager = issue(
            &issuer,
            "controller-manager client certificate",
            name("system:kube-controller-manager", None),
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;

        let service_account = key_pair("service-account signing key")?;
        Ok(ClusterPki {
            ca,
            apiserver,
            admin,
            controller_manager,
            service_account_key_pem: service_account.serialize_pem(),
            service_account_public_pem: service_account.public_key_pem(),
        })
    }

    /// A kubeconfig for `client` as `user` against `server`, with every certificate inline so the file
    /// stands alone.
    pub(crate) fn kubeconfig(&self, server: &str, user: &str, client: &CertifiedKey) -> String {
        let ca = BASE64.encode(self.ca.cert_pem.as_bytes());
        let cert = BASE64.encode(client.cert_pem.as_bytes());
        let key = BASE64.encode(client.key_pem.as_bytes());
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: cairn-testkube
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: cairn-testkube
  context:
    cluster: cairn-testkube
    user: {user}
current-context: cairn-testkube
"
        )
    }
}

fn key_pair(what: &'static str) -> Result<KeyPair, Error> {
    // ECDSA P-256: quick to generate, and accepted by Go's TLS and for service-account tokens (ES256).
    KeyPair::generate().map_err(|source| pki_error(what, source))
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name.push(DnType::CommonName, common_name);
    name
}

fn issue(
    issuer: &Issuer<'_, KeyPair>,
    what: &'static str,
    subject: DistinguishedName,
    alt_names: Vec<String>,
    usage: ExtendedKeyUsagePurpose,
) -> Result<CertifiedKey, Error> {
    let key = key_pair(what)?;
    let mut params = CertificateParams::new(alt_names).map_err(|source| pki_error(what, source))?;
    params.distinguished_name = subject;
    // ECDSA keys only sign (the TLS key exchange is ephemeral), so no key encipherment.
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    let cert = params
        .signed_by(&key, issuer)
        .map_err(|source| pki_error(what, source))?;
    Ok(CertifiedKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().clone(),
        key_der: key.serialize_der(),
    })
}

fn pki_error(what: &'static str, source: rcgen::Error) -> Error {
    Error::Pki { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_inlines_the_ca_and_the_client() {
        let pki = ClusterPki::generate().unwrap();
        let config = pki.kubeconfig("https://127.0.0.1:1234", "someone", &pki.admin);
        assert!(
            config.contains("server: https://127.0.0.1:1234\n"),
            "{config}"
        );
        assert!(config.contains("- name: someone\n"), "{config}");
        let ca = BASE64.encode(pki.ca.cert_pem.as_bytes());
        assert!(
            config.contains(&format!("certificate-authority-data: {ca}\n")),
            "{config}"
        );
        assert!(pki.admin.key_pem.contains("BEGIN PRIVATE KEY"));
        assert!(pki.service_account_public_pem.contains("BEGIN PUBLIC KEY"));
    }
}
