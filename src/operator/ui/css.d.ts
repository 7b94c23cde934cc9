// Stylesheets are imported for their side effect; the bundler emits them.
declare module "*.css";
