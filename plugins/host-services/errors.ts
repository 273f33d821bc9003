/**
 * Error codes of the management API (registered once in core's registry).
 *
 * @module
 */
import { defineError } from 'lia/plugin';

/** The service manager (systemd, or a service's own start/stop) failed the action. */
export const serviceManagerFailed = defineError(
  'LIA_ERR_SERVICE_MANAGER',
  502,
  'The service manager (systemd or the embedded supervisor) failed or refused the action.',
);
