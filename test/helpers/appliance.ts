/**
 * Starts a real appliance for a test: the public `lia/testing` helper (core/testing/index.ts),
 * which plugin authors use too, so LIA's own tests exercise it on every run: HTTPS on an
 * ephemeral port of 127.0.0.1, a fresh data directory (so a fresh CA and master key), the
 * default plugins with the test's entries merged over them, mDNS off unless a test turns it on.
 * The returned `fetch` trusts the generated CA (no `-k`) and sends the key.
 *
 * @example
 * ```ts
 * const app = await startTestAppliance()
 * t.teardown(app.close)
 * const res = await app.fetch('/api/tags')
 * ```
 *
 * @module
 */
export { startTestAppliance, type TestAppliance, type TestApplianceOptions } from 'lia/testing';
