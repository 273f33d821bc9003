/**
 * Where the key lives: `sessionStorage` (this tab, gone when it closes; the default) or
 * `localStorage` (this browser, until sign-out), as the user chooses at sign-in. Nothing else
 * keeps it.
 */
const KEY = 'lia.key';

export type KeyPlace = 'session' | 'local';

export function getKey(): string | null {
  return sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY);
}

export function saveKey(key: string, place: KeyPlace): void {
  forgetKey();
  (place === 'local' ? localStorage : sessionStorage).setItem(KEY, key);
}

/** Replaces the key where it is kept now (after a rotation). */
export function replaceKey(key: string): void {
  saveKey(key, localStorage.getItem(KEY) !== null ? 'local' : 'session');
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
}
