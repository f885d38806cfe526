/** Who is signed in, as GET /api/v1/whoami answers (the pages show only what its scopes allow). */
export interface Who {
  name: string;
  scopes: string[];
  administrator: boolean;
}

export const can = (who: Who, scope: string): boolean => who.scopes.includes(scope);
