package interop

import (
	"crypto/x509"
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
)

// testPKI is a throwaway CA and a server certificate it signed, for 127.0.0.1 and
// localhost, written as PEM files for the peer (forwardtest.NewTLSCert makes them).
type testPKI struct {
	roots    *x509.CertPool
	certFile string
	keyFile  string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	c, err := forwardtest.NewTLSCert("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	files, err := c.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{roots: c.CAPool, certFile: files.ServerCert, keyFile: files.ServerKey}
}
