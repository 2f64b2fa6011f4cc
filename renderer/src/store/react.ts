import { createContext, useContext } from 'react';
import { useStore } from 'zustand';
import type { ArborState, ArborStore } from './state';

export const StoreContext = createContext<ArborStore | null>(null);

export function useArbor<T>(selector: (s: ArborState) => T): T {
  const store = useContext(StoreContext);
  if (!store) throw new Error('useArbor outside <StoreContext.Provider>');
  return useStore(store, selector);
}

export function useArborStore(): ArborStore {
  const store = useContext(StoreContext);
  if (!store) throw new Error('useArborStore outside <StoreContext.Provider>');
  return store;
}
