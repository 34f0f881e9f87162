package forwardtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSCert is a throwaway certificate authority and two certificates it signed — one for a
// receiver, one for a client (mutual TLS) — for tests, in Go and PEM forms. The PEM forms
// are for real receivers (fluentd's cert_path/private_key_path/ca_path, fluent-bit's
// tls.crt_file/tls.key_file, Node's tls options); see WriteFiles. Keys are ECDSA P-256,
// certificates valid from an hour ago for a day. A TLSCert is read-only after
// NewTLSCert, safe for concurrent use.
type TLSCert struct {
	// CAPool holds the CA: a client's RootCAs, or a receiver's ClientCAs.
	CAPool *x509.CertPool
	// Server is the receiver's certificate, for the hosts given to NewTLSCert.
	Server tls.Certificate
	// Client is a client certificate (CN "forwardtest-client") for mutual TLS.
	Client tls.Certificate
	// CAPEM, ServerCertPEM, ServerKeyPEM, ClientCertPEM and ClientKeyPEM are the same in
	// PEM (keys in PKCS #8).
	CAPEM, ServerCertPEM, ServerKeyPEM, ClientCertPEM, ClientKeyPEM []byte
}

// NewTLSCert creates a CA and certificates signed by it. The server certificate is valid
// for hosts (names or IP addresses); the default is "localhost", "127.0.0.1" and "::1".
// It returns an error only if key generation or signing fails.
func NewTLSCert(hosts ...string) (*TLSCert, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("forwardtest: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "forwardtest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("forwardtest: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("forwardtest: CA certificate: %w", err)
	}
	c := &TLSCert{CAPool: x509.NewCertPool(), CAPEM: pemBlock("CERTIFICATE", caDER)}
	c.CAPool.AddCert(ca)

	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, hosts []string) (tls.Certificate, []byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return tls.Certificate{}, nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return tls.Certificate{}, nil, nil, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return tls.Certificate{}, nil, nil, err
		}
		certPEM, keyPEM := pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		return cert, certPEM, keyPEM, err
	}
	if c.Server, c.ServerCertPEM, c.ServerKeyPEM, err = leaf(2, hosts[0], x509.ExtKeyUsageServerAuth, hosts); err != nil {
		return nil, fmt.Errorf("forwardtest: server certificate: %w", err)
	}
	if c.Client, c.ClientCertPEM, c.ClientKeyPEM, err = leaf(3, "forwardtest-client", x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, fmt.Errorf("forwardtest: client certificate: %w", err)
	}
	return c, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// ServerConfig returns a new receiver TLS config: the server certificate, TLS 1.2 or
// later. For mutual TLS set ClientAuth to tls.RequireAndVerifyClientCert and ClientCAs
// to CAPool; for fluentd's default, pass WithTLS12Only to the receiver.
func (c *TLSCert) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.Server}, MinVersion: tls.VersionTLS12}
}

// ClientConfig returns a new client TLS config that trusts the CA (RootCAs), TLS 1.2 or
// later, without a client certificate (add Client to Certificates for mutual TLS).
func (c *TLSCert) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.CAPool, MinVersion: tls.VersionTLS12}
}

// TLSFiles are the paths WriteFiles wrote (for a client's Security.TLSFiles).
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// WriteFiles writes the PEM forms into dir (ca.pem, server.pem, server-key.pem,
// client.pem, client-key.pem; keys with mode 0600) for receivers configured by file path,
// and returns the paths. It returns the first write error.
func (c *TLSCert) WriteFiles(dir string) (TLSFiles, error) {
	f := TLSFiles{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CA, c.CAPEM, 0o644}, {f.ServerCert, c.ServerCertPEM, 0o644}, {f.ServerKey, c.ServerKeyPEM, 0o600},
		{f.ClientCert, c.ClientCertPEM, 0o644}, {f.ClientKey, c.ClientKeyPEM, 0o600},
	} {
		if err := os.WriteFile(w.path, w.data, w.mode); err != nil {
			return TLSFiles{}, fmt.Errorf("forwardtest: %w", err)
		}
	}
	return f, nil
}
