/**
 * The Anthropic surface's credential: Anthropic's SDKs and Claude Code send the key in `x-api-key`
 * rather than as `Authorization: Bearer`. The routes of this surface declare the header in their
 * `config.credentialHeaders` (a `lia/plugin` route option), and the auth strategy that owns the
 * keys (auth-api-key) reads it there, with the same checks as a Bearer key (shape, checksum, the
 * limit on wrong keys). On every other route `x-api-key` is not a credential. A request whose
 * `Authorization` and `x-api-key` carry different keys is refused (401). The `anthropic-version`
 * and `anthropic-beta` headers are not looked at.
 *
 * @module
 */

/** The headers that carry the key on `/v1/messages` and `/v1/messages/count_tokens`, besides `Authorization`. */
export const CREDENTIAL_HEADERS: readonly string[] = Object.freeze(['x-api-key']);
