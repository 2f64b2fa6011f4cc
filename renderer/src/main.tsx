// The global styles first: each view's own CSS (beside it, imported by the view) comes after them.
import './styles.css';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { connectEngine } from './api/connection';
import { createArborStore } from './store';
import { StoreContext } from './store/react';

const api = connectEngine();
const store = createArborStore(api);
(window as unknown as { __arborStore?: unknown }).__arborStore = store;

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <StoreContext.Provider value={store}>
      <App />
    </StoreContext.Provider>
  </StrictMode>,
);
