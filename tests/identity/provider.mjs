// A real OpenID provider for the identity tests: node-oidc-provider with
// the client-credentials grant, JWT access tokens whose audience is
// `zarr-serve`, and a custom `groups` claim per client.
//
//   node provider.mjs PORT JWKS_FILE
//
// JWKS_FILE holds the private signing keys (the test writes them, and
// rotates keys by restarting the provider with another file).
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(`${process.env.OIDC_PROVIDER_MODULES}/`);
const Provider = require('oidc-provider').default ?? require('oidc-provider');

const [port, jwksFile] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
// Resource indicators (absolute URIs) and the audience each token names.
const RESOURCES = {
  'https://zarr.example.org/': 'zarr-serve',
  'https://other.example.org/': 'another-service',
};

// Each client: its secret, the scopes it may ask for and its groups.
const CLIENTS = {
  'ocean-pipeline': { secret: 'ocean-secret', scope: 'zarr.read zarr.write', groups: ['ocean'] },
  'land-pipeline': { secret: 'land-secret', scope: 'zarr.read', groups: ['land'] },
  'reader-bot': { secret: 'reader-secret', scope: 'zarr.read', groups: [] },
};

const provider = new Provider(issuer, {
  clients: Object.entries(CLIENTS).map(([id, c]) => ({
    client_id: id,
    client_secret: c.secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope: c.scope,
  })),
  scopes: ['openid', 'zarr.read', 'zarr.write'],
  jwks: JSON.parse(fs.readFileSync(jwksFile, 'utf8')),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => 'https://zarr.example.org/',
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        const audience = RESOURCES[resource];
        if (!audience) throw new Error(`unknown resource ${resource}`);
        return {
          scope: 'zarr.read zarr.write',
          audience,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  extraTokenClaims: (_ctx, token) => ({ groups: CLIENTS[token.clientId]?.groups ?? [] }),
});

provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`oidc-provider listening at ${issuer}`);
});
