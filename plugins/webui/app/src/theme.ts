/**
 * Light and dark: the page follows the system (`prefers-color-scheme`) until the user picks one;
 * the pick is kept in `localStorage` (`lia.theme`) and set as `data-theme` on `<html>`.
 */
export type Theme = 'system' | 'light' | 'dark';
const STORE = 'lia.theme';

export function currentTheme(): Theme {
  const t = localStorage.getItem(STORE);
  return t === 'light' || t === 'dark' ? t : 'system';
}

export function applyTheme(theme: Theme): void {
  if (theme === 'system') {
    localStorage.removeItem(STORE);
    delete document.documentElement.dataset.theme;
  } else {
    localStorage.setItem(STORE, theme);
    document.documentElement.dataset.theme = theme;
  }
}
