package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files the control plane needs: a CA, the apiserver's serving
// certificate, and the service-account signing key.
type pki struct {
	CACert, ServingCert, ServingKey, SAKey, SAPub string
}

func writePKI(dir string) (pki, error) {
	p := pki{
		CACert:      filepath.Join(dir, "ca.crt"),
		ServingCert: filepath.Join(dir, "apiserver.crt"),
		ServingKey:  filepath.Join(dir, "apiserver.key"),
		SAKey:       filepath.Join(dir, "sa.key"),
		SAPub:       filepath.Join(dir, "sa.pub"),
	}
	if _, err := os.Stat(p.SAPub); err == nil {
		return p, nil // reuse: tokens and certs stay valid across restarts
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "async-helm-local-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return p, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, err
	}
	files := []struct {
		path, typ string
		der       []byte
	}{
		{p.CACert, "CERTIFICATE", caDER},
		{p.ServingCert, "CERTIFICATE", srvDER},
		{p.ServingKey, "EC PRIVATE KEY", srvKeyDER},
		{p.SAKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)},
		{p.SAPub, "PUBLIC KEY", saPubDER},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return p, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return p, nil
}

func randomToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}
