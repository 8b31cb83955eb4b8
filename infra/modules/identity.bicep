// The user-assigned managed identity the function app runs as: storage, Key Vault, Azure OpenAI and Redis all
// trust this one identity, so access survives re-creating the app.

@description('Azure region for the identity.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('User-assigned managed identity name.')
param name string

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output name string = identity.name
output clientId string = identity.properties.clientId
output principalId string = identity.properties.principalId
