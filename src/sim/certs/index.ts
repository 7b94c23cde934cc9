export { type CertAction, type CertsOptions, type CertsReport, createCerts } from "./create.js";
export { type CertsLayout, certsLayout } from "./layout.js";
export { OPENSSL_INSTALL_HINT, OpensslError } from "./openssl.js";
