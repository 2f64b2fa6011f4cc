/** A fork (git-branch style) drawn as SVG: the font may have no branch glyph. */
export function ForkIcon({ size = 11 }: { size?: number }) {
  return (
    <svg className="fork-icon" width={size} height={size} viewBox="0 0 16 16" aria-hidden="true" fill="none" stroke="currentColor" strokeWidth={1.7}>
      <circle cx="4" cy="3" r="1.9" />
      <circle cx="4" cy="13" r="1.9" />
      <circle cx="12" cy="4.5" r="1.9" />
      <path d="M4 4.9v6.2M12 6.4c0 3.4-8 2.6-8 4.7" />
    </svg>
  );
}
