// Package profile owns imagectl's client of the GPUaaS admin API's MAAS
// site deploy profiles, whose distro_series selects the image a deploy
// installs: reading a profile's distro_series (GET) and setting it (PATCH
// {api}/api/v1/admin/maas-sites/{site}/profiles/{profile} with a bearer
// token, a JSON body and an X-Idempotency-Key), and the same request
// written out as a curl command for an operator when imagectl has no admin
// API to call (Manual).
//
// Set is safe under faults: it reads the profile first and sends nothing
// when it already holds the value; it retries 5xx and 429 with backoff;
// a PATCH that gets no answer (a timeout, a dropped connection) is an
// unknown outcome, resolved by reading the profile back, as operators
// treat a MAAS mutation that timed out. The bearer token is never
// put in an error: errors say where it came from (Config.TokenSource).
//
// Which value a profile gets and when is release's; where the URL,
// ids and token come from is upload's (sites.hcl's deploy_profile block).
// upload/profile/profilesim is the HTTP fake of the endpoint the tests run
// against.
package profile
