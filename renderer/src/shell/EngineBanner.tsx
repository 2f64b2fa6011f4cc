import { useArbor } from '../store/react';
import { WorkspaceBanner } from './WorkspaceBanner';

/** The engine is lost (crashed, restarting, or the connection closed); when it is up, the workspace banner. */
export function EngineBanner() {
  const c = useArbor((s) => s.connection.status);
  if (c.state === 'open') return <WorkspaceBanner />;
  if (c.state === 'engine-crashed')
    return (
      <div className="banner err" role="alert" data-testid="crash-banner">
        The engine stopped unexpectedly: {c.message}.{' '}
        {c.restarting ? `Restarting it${c.attempt ? ` (attempt ${c.attempt})` : ''}…` : 'It will not be restarted again; save your work and restart Arbor.'}
      </div>
    );
  if (c.state === 'closed')
    return (
      <div className="banner err" role="alert" data-testid="crash-banner">
        Lost the connection to the engine: {c.message}. Reconnecting…
      </div>
    );
  return null;
}
